"""Model provisioning: the catalog (what, with which hashes), the sources (hub or registry), and the installer."""
