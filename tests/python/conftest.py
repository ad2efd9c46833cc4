import os
import sys

# Make tests/python importable (the opdb package).
sys.path.insert(0, os.path.dirname(__file__))
