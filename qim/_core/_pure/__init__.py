"""Pure-Python twins of the compiled core (qim._core.*): the fallback selected by
QIM_PUREPYTHON=1 and the oracle the compiled modules are tested against.

Each module here implements exactly the API of the matching `qim/_core/<name>.pyi`
stub, raising the same `qim.errors` classes for the same bad input.
"""
