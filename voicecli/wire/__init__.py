"""What client and endpoint share: the protocol, the listener's playout model, the server's options."""
