"""`python -m devlint` entry point."""

from devlint.cli import main

if __name__ == "__main__":
    main()
