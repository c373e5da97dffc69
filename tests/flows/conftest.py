import sys
from pathlib import Path

# tests/flows/nets.py builds small integer networks shared by the compiler tests.
sys.path.insert(0, str(Path(__file__).parent))
