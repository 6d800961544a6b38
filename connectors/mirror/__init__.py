"""MirrorMaker 2 for Headwater: replication policies and offset translation (the connectors follow)."""
