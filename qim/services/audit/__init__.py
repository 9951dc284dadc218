"""Independent audits of the durable logs (docs/design.md §12; seed 000 "orphan 独立审计").

`dispatch_audit`: Outbox (commit facts with frozen audience) against the dispatch log;
pure comparison logic fed by `qimctl audit dispatch` (qim/cli/qimctl.py).
`archive_audit`: Outbox against the archived rows (docs/decisions/0023), fed by `qimctl audit
archive` (qim/cli/qimctl_archive.py).
"""

from qim.services.audit.dispatch_audit import AuditResult, DispatchAudit, audit

__all__ = ["AuditResult", "DispatchAudit", "audit"]
