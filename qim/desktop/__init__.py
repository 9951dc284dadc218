"""qim-desktop: the terminal client (docs/design.md §2 "client"), a full-screen Textual app
on qim.sdk.Client. Entry point: qim.desktop.cli:main."""
