"""The CLI's front ends and tools: chat, say, doctor, shell completion, the user's config file."""
