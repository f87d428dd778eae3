"""Build step for the one compiled part: Craft's value reader (``ticdc_lakehouse/decode/_craft_reader.pyx``).

Everything else is in ``pyproject.toml``. The extension is optional: where it cannot be built (no C compiler),
the install still succeeds and the Craft decoder uses its pure-Python readers, which give the same events.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("ticdc_lakehouse.decode._craft_reader", ["ticdc_lakehouse/decode/_craft_reader.pyx"],
                             optional=True)])
