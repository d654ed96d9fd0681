"""Local stand-ins for remote services, speaking their real wire protocols on 127.0.0.1 (test equipment)."""
