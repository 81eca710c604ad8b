"""FAKE NeuronConfig family: keeps the keyword arguments it was given, like the real classes' fields."""


class OnDeviceSamplingConfig:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class NeuronConfig:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        for k, v in kwargs.items():
            setattr(self, k, v)

    def to_json(self):
        out = {}
        for k, v in self.kwargs.items():
            if isinstance(v, OnDeviceSamplingConfig):
                v = {"on_device_sampling": v.kwargs}
            elif not isinstance(v, (str, int, float, bool, list, dict, type(None))):
                v = str(v)
            out[k] = v
        return out


class MoENeuronConfig(NeuronConfig):
    pass
