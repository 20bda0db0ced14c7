"""``python -m bulkwire.testing``: runs a loopback server until interrupted."""
import argparse

from .server import serve

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="bulkwire's loopback bulk insert server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--database", default="db")
    parser.add_argument("--count-only", action="store_true", help="count bytes and commands, keep nothing")
    args = parser.parse_args()
    serve(args.port, args.database, keep_body=not args.count_only)
