"""A host function whose signature cannot be read, for the tests of the kernel classes that
fall back when inspect.signature fails (test_kernel.py, test_pyccel_kernel.py)."""


class Unsigned:
    """A callable whose parameter names cannot be read (like a compiled builtin)."""

    __signature__ = "not inspectable"

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)
