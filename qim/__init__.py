"""QIM: a message backend for large instant-messaging services (see docs/)."""

__version__ = "0.1.0"
