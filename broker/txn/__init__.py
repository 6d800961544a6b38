"""The transaction coordinator: transactional ids, their producers, and the ends of their transactions."""

from .coordinator import TransactionCoordinator
from .state import TxnMetadata, TxnState

__all__ = ["TransactionCoordinator", "TxnMetadata", "TxnState"]
