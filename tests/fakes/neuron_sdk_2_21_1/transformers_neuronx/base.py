"""FAKE transformers_neuronx.base.NeuronModelBase (0.13.380; aws-neuron/transformers-neuronx 1ade6d74,
src/transformers_neuronx/base.py): the base of the serializable `*ForSampling` classes. `save(dir)`
writes one `<sha256 of the HLO>[:20].neff` per graph (`_save_compiled_artifacts`); after `load(dir)`,
`to_neuron()` reads them and never compiles (`_load_compiled_artifacts`). GPT-J and GPT-NeoX do NOT
derive from it (module.PretrainedModel): they have no `save`, `load` or `serialization_enabled`."""

from transformers_neuronx import _fake, module


class NeuronModelBase(module.WrappingCheckpointCompatibleModel):
    is_fid = False

    def save(self, directory, sharded_weights=False):
        assert self.serialization_enabled(), "serialization is not enabled for this model"
        _fake.save_neffs(self, directory)

    def load(self, directory):
        assert self.serialization_enabled(), "serialization is not enabled for this model"
        self._compiled_artifacts_directory = directory

    def to_neuron(self):
        _fake.compile_or_load(self, getattr(self, "_compiled_artifacts_directory", None))

    def serialization_enabled(self):
        return True  # every NeuronModelBase model registers its decoders for serialization
