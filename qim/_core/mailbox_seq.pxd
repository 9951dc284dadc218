# cython: language_level=3
"""Typed interface of qim._core.mailbox_seq (docs/design.md §3): shard_epoch (16) ‖ log_offset (48)."""

from libc.stdint cimport uint64_t

cdef uint64_t c_compose(object shard_epoch, object log_offset) except? 0
cdef uint64_t c_check_seq(object mailbox_seq) except? 0
