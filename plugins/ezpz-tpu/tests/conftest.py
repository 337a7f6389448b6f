import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tpu_recorded, like the other vendor suites' recorded modules
