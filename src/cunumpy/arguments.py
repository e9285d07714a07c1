"""Kernel argument objects (API.md section 3): CudaArguments, CudaStruct, CudaStructArguments."""

__all__: list[str] = []
