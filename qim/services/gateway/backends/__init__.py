"""The gateway's half of each backend, one module per service kind (writer, mailbox,
session, room): the checks the declared calls name (qim/wire/calls.py) and, for a
backend with state per client connection, its LocalBackend (qim/topology.py
GatewayBackend.local). The gateway loads them by the declarations' dotted paths."""
