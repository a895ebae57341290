"""Use cases. They talk to the outside only through the ports in ``ports``."""
