"""watchkeeper: measures speculative decoding on llama-server and keeps the evidence."""

__version__ = "0.1.0"
