"""The Textual app: conversation, live latency waterfall, status bar, typed input."""
