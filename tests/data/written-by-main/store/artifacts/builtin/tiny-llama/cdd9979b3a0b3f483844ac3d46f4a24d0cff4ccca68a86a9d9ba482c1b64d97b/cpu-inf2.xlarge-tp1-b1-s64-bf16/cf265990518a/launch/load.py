# Load the compiled CPU artifact (download the folder first: aws s3 sync / cp -r).
# artifact: file:///tmp/store-main/artifacts/builtin/tiny-llama/cdd9979b3a0b3f483844ac3d46f4a24d0cff4ccca68a86a9d9ba482c1b64d97b/cpu-inf2.xlarge-tp1-b1-s64-bf16/cf265990518a/cpu-aoti
import sys
from pathlib import Path

from neuronforge.compilation.backends.cpu import CpuModel

model = CpuModel(Path(sys.argv[1] if len(sys.argv) > 1 else 'cpu-aoti'))
print(model.generate([1, 2, 3], 8)['tokens'])
