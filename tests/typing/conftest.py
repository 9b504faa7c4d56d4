# the files here are input to the type checkers (tests/test_typing.py), never imported: the planted errors raise
collect_ignore = ["check_public_api.py", "planted_error.py"]
