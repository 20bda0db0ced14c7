"""Real database servers for the tests that ask for them (``pytest --server KIND``).

Each server kind has its own package here: it fetches what the server needs once per machine,
starts it on loopback inside a private network namespace, waits until it answers, and stops it
when the tests (or the process) end. Nothing here is part of the installed package.
"""
