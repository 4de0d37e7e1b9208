"""Test-run hygiene shared by every test file.

Agents are full of reference cycles (the agent, its tools and its gates point at each other), so a
dropped agent's stores close only when the cycle collector runs. One `build_agent` opens about a
dozen descriptors; a few hundred tests that build agents would pile them up between collections.
After a test that leaves many descriptors open, collect the garbage so the next one starts clean.
"""
import gc, os

def pytest_runtest_teardown(item, nextitem):
    if len(os.listdir('/proc/self/fd')) > 256: gc.collect()
