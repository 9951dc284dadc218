"""The MediaService (issue 40; docs/decisions/0137, 0138): uploads checked and stored in object storage, authenticated downloads."""
