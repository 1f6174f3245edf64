"""Serving analysts: SQL answers, the Thrift server and its read-only rule, printed rows."""
