"""Package discovery: the repository's top-level folders install beneath `sessionstore.`.

`compaction/`, `cli/` and `migrations/` stay at the top of the checkout, where a newcomer
looks for them, but install as `sessionstore.compaction`, `sessionstore.cli` and
`sessionstore.migrations`, so nothing this project ships takes a common top-level name.
Subpackages are found, never listed by hand (a test builds the wheel and runs it).
"""

from setuptools import find_namespace_packages, setup

MAPPED = {"sessionstore.compaction": "compaction", "sessionstore.cli": "cli", "sessionstore.migrations": "migrations"}

SKIP = ["*__pycache__*", "*.egg-info*"]

packages = find_namespace_packages(include=["sessionstore", "sessionstore.*"], exclude=SKIP)
for name, folder in MAPPED.items():
    packages += [name] + [f"{name}.{sub}" for sub in find_namespace_packages(folder, exclude=SKIP)]

setup(packages=packages, package_dir=dict(MAPPED))
