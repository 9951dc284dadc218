"""Build the Cython extensions of qim._core (QIM_DEBUG=1 compiles invariant checks in)."""

import os

from Cython.Build import cythonize
from setuptools import Extension, setup

MODULES = ("frame", "mailbox_seq", "watermark", "eventgroup", "ids", "sendkey")
DEBUG = os.environ.get("QIM_DEBUG", "") == "1"
# Cythonize and compile the modules in parallel (the wheel check builds from scratch)
JOBS = min(len(MODULES), os.cpu_count() or 1)

extensions = [
    Extension(
        f"qim._core.{name}",
        [f"qim/_core/{name}.pyx"],
        extra_compile_args=["-O2"],
    )
    for name in MODULES
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compile_time_env={"QIM_DEBUG": DEBUG},
        compiler_directives={"boundscheck": DEBUG, "wraparound": False, "cdivision": True},
        nthreads=JOBS,
    ),
    options={"build_ext": {"parallel": JOBS}},
)
