"""Tracker stage: GitHub and Gitea clients, issue bodies and PR comments, escaping.

Only `http.py` imports httpx and only `checkout.py` imports git. `open_forge` builds a client
from `[tracker]`, reading the token from the environment or a file (tokens.py).
"""
