"""This host: its hardware fingerprint (and, on GPU hosts, the GPUs)."""
