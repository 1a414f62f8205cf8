"""The project's JVM classes, built from the Maven module ``jvm/`` at the checkout's top: the names
of the classes the runtime calls (:mod:`metastore.jvm.classes`) and the jars a node loads
(:mod:`metastore.jvm.jars`). Building them is the launcher's job
(:mod:`metastore.dev.jvm_build`); a node only finds them."""
