"""A job's failure message says what went wrong, also when a batch function raised in Python."""

from __future__ import annotations

from medallion.io.failures import python_error

# As Spark 4 reports a foreachBatch function's exception (shortened: the query's plan follows).
SPARK_TEXT = """[STREAM_FAILED] Query [id = 1b60, runId = 13e8] terminated with exception: \
[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach \
batch sink. Reason: An exception was raised by the Python Proxy. Return Message: Traceback (most \
recent call last):
  File "/venv/site-packages/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/venv/site-packages/pyspark/sql/utils.py", line 162, in call
    self.func(DataFrame(jdf, wrapped_session_jdf), batch_id)
  File "/app/medallion/silver/job.py", line 210, in write_batch
    raise ValueError("no such column: amount")
ValueError: no such column: amount
 SQLSTATE: 39000 SQLSTATE: XXKST
=== Streaming Query ===
Identifier: [id = 1b60, runId = 13e8]
"""

CHAINED = """Return Message: Traceback (most recent call last):
  File "/app/a.py", line 3, in first
    raise KeyError("k")
KeyError: 'k'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/a.py", line 5, in first
    raise RuntimeError("while handling k")
RuntimeError: while handling k
"""

JVM_CALL = """Return Message: Traceback (most recent call last):
  File "/app/medallion/sinks/delta.py", line 88, in append
    frame.write.format("delta").save(path)
  File "/venv/site-packages/py4j/protocol.py", line 327, in get_return_value
    raise Py4JJavaError(
py4j.protocol.Py4JJavaError: An error occurred while calling o212.save.
: java.net.ConnectException: Connection refused
\tat java.base/sun.nio.ch.Net.connect0(Native Method)
"""


def test_the_python_exception_and_where_it_was_raised_come_up() -> None:
    assert python_error(SPARK_TEXT) == (
        "ValueError: no such column: amount (at /app/medallion/silver/job.py:210, in write_batch)")


def test_a_chained_exception_reports_the_last_one() -> None:
    assert python_error(CHAINED) == "RuntimeError: while handling k (at /app/a.py:5, in first)"


def test_a_failed_jvm_call_reports_the_jvm_error() -> None:
    assert python_error(JVM_CALL) == (
        "py4j.protocol.Py4JJavaError: An error occurred while calling o212.save.: "
        "java.net.ConnectException: Connection refused "
        "(at /app/medallion/sinks/delta.py:88, in append)")


SQL_RAISED = """Return Message: Traceback (most recent call last):
  File "/venv/site-packages/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
  File "/venv/site-packages/pyspark/sql/utils.py", line 162, in call
    self.func(DataFrame(jdf, wrapped_session_jdf), batch_id)
  File "/app/medallion/silver/job.py", line 231, in write_batch
    counts = valid.count()
  File "/venv/site-packages/pyspark/sql/dataframe.py", line 1030, in count
    return int(self._jdf.count())
  File "/venv/site-packages/pyspark/errors/exceptions/captured.py", line 288, in deco
    raise converted from None
pyspark.errors.exceptions.captured.SparkRuntimeException: [USER_RAISED_EXCEPTION] boom SQLSTATE: P0001
"""


def test_where_is_the_code_that_called_spark_not_pyspark_s_own_frames() -> None:
    """An error Spark raised while a batch ran is placed at the code that called Spark, not in
    PySpark's own frames (``deco``)."""
    assert python_error(SQL_RAISED) == (
        "pyspark.errors.exceptions.captured.SparkRuntimeException: [USER_RAISED_EXCEPTION] boom "
        "SQLSTATE: P0001 (at /app/medallion/silver/job.py:231, in write_batch)")


def test_a_text_without_a_traceback_has_no_python_error() -> None:
    assert python_error("[DELTA_CONCURRENT_APPEND] Files were added ...") is None
