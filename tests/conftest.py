import sys
from pathlib import Path

# Test helpers shared across folders (graph_builder.py) live beside this file.
sys.path.insert(0, str(Path(__file__).parent))
