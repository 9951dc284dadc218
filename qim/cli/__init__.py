"""Command-line hosts: qim-loadgen (replay demo, load), qimctl."""
