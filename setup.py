"""Maps the top-level folders onto the ``headwater.*`` import names.

``headwater/`` is the ``headwater`` package itself (front door, wire codec, properties); the
product layout keeps ``broker/``, ``connect/`` and ``connectors/`` at the top of the repository,
while code imports them as ``headwater.broker`` and so on.
"""

from setuptools import find_packages, setup

ROOTS = {
    "headwater": "headwater",
    "broker": "headwater.broker",
    "connect": "headwater.connect",
    "connectors": "headwater.connectors",
}

packages: list[str] = []
package_dir: dict[str, str] = {}
for folder, name in ROOTS.items():
    package_dir[name] = folder
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

# The web console's static files ship inside the package (no build step at install), and so do Kafka's message
# schemas that kafka-python lacks (broker/protocol/schemas/)
setup(packages=packages, package_dir=package_dir,
      package_data={"headwater.connect.console": ["static/*", "static/**/*"],
                    "headwater.broker.protocol.schemas": ["*.json"]})
