"""Pure-Python twins of every function of ``cunumpy._core``.

They are the oracles of the C functions in the tests and the fallback where the extension
cannot be built. Never on a hot path.
"""

from .bitgen import *  # noqa: F403
from .compact import *  # noqa: F403
from .cudasig import *  # noqa: F403
from .extents import *  # noqa: F403
from .morton import *  # noqa: F403
from .mpi_post import *  # noqa: F403
from .pack import *  # noqa: F403
from .philox import *  # noqa: F403
from .scan import *  # noqa: F403
from .segment import *  # noqa: F403
from .sort import *  # noqa: F403
from .struct import *  # noqa: F403
from .threads import *  # noqa: F403
from .traverse import *  # noqa: F403
