"""Classes, packages and static methods of the driver's JVM looked up once per gateway, not at every use.

Why: py4j resolves every step of a name at every use, each a gateway round trip: ``sc._jvm.PythonUtils`` (which
pyspark's ``_to_seq`` asks for every list of columns it passes), ``.toSeq`` on it, each part of
``jvm.org.apache.iceberg...``. Resolving a bare name makes the JVM try it under each of the gateway's imported
packages, and every miss searches the class path (about 300 jars): a four-table backfill sent 965 such lookups
(137 of ``PythonUtils``, 128 of its ``toSeq``), and class loading was a tenth of the py4j gateway threads' samples.
pyspark's functions (``F.col``, ``F.when``...) are found the same way (``getattr(getattr(sc._jvm,
"org.apache.spark.sql.functions"), name)``): remembered here too, they cost no round trip after their first use.
The answers do not change while the JVM runs: a class is a class until the JVM exits, a static method is the same
method.

What is remembered: the packages and classes a name resolves to, and a class's static methods and nested classes.
Not remembered: a static field's value (it may change), and a name that does not resolve (a jar added later may
bring it). Remembered objects are py4j's own proxies, shared by the threads of the driver as py4j allows (a static
method's proxy carries no state of a call).
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView


def _remembered(holder: Any, name: str, found: Any) -> Any:
    """``found`` (what ``holder.name`` resolved to) kept on ``holder`` when it can never change, its own names
    remembered in turn."""
    if type(found) is JavaPackage:
        found.__class__ = _RememberingPackage
    elif type(found) is JavaClass:
        found.__class__ = _RememberingClass
    elif not isinstance(found, JavaMember):
        return found  # a static field's value, or py4j's help object
    holder.__dict__[name] = found  # later lookups find it without ``__getattr__``
    return found


class _RememberingView(JVMView):
    """The gateway's ``jvm`` view, remembering the classes and packages its names resolve to."""

    def __getattr__(self, name: str) -> Any:
        return _remembered(self, name, JVMView.__getattr__(self, name))


class _RememberingPackage(JavaPackage):
    """A package remembering its sub-packages and classes."""

    def __getattr__(self, name: str) -> Any:
        return _remembered(self, name, JavaPackage.__getattr__(self, name))


class _RememberingClass(JavaClass):
    """A class remembering its static methods and nested classes (not its static fields' values)."""

    def __getattr__(self, name: str) -> Any:
        return _remembered(self, name, JavaClass.__getattr__(self, name))


def remember_jvm_names(sc: Any) -> None:
    """Make ``sc``'s JVM view (``sc._jvm``, also the session's ``_jvm``) remember what its names resolve to
    (idempotent; a new ``SparkContext`` brings a new view, which this is called for again)."""
    view = sc._jvm
    if type(view) is JVMView:
        view.__class__ = _RememberingView
