"""`python -m atf_sdk` is the `atf` command."""

from atf_sdk.cli import main

if __name__ == "__main__":
    main()
