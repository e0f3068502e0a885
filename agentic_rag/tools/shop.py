"""Order and stock lookups over a SQLite database opened read-only (the example's shop.sqlite)."""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from ..errors import ConfigurationError, ToolError
from .registry import Tool

_ORDER_ID = re.compile(r"\b[A-Z]\d{3,}\b")
_SKU = re.compile(r"\b[A-Z]{2,4}-\d{2,}\b")


def _query(db_path: Path, sql: str, parameters: tuple) -> list[sqlite3.Row]:
    # mode=ro: the file cannot be written through this connection; one connection per call, no sharing
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=2) as db:
        db.row_factory = sqlite3.Row
        return db.execute(sql, parameters).fetchmany(50)


def shop_tools(db_path: str | Path) -> list[Tool]:
    """`order_status(order_id)` and `stock(sku)` over the given database."""
    path = Path(db_path)
    if not path.is_file():
        raise ConfigurationError(f"database not found: {path}; build it with python examples/data/db/build_db.py")

    def order_status(order_id: str) -> str:
        rows = _query(path, "SELECT * FROM orders WHERE order_id = ?", (str(order_id).upper(),))
        if not rows:
            raise ToolError(f"no order {order_id!r} in {path.name}")
        r = rows[0]
        shipped = f", shipped on {r['ship_date']}" if r["ship_date"] else ""
        return (f"order {r['order_id']}: {r['quantity']} x {r['sku']} for {r['customer']}, placed {r['order_date']}, "
                f"status {r['status']}{shipped}")

    def stock(sku: str) -> str:
        rows = _query(path, "SELECT * FROM inventory WHERE sku = ?", (str(sku).upper(),))
        if not rows:
            raise ToolError(f"no product with SKU {sku!r} in {path.name}")
        r = rows[0]
        available = r["on_hand"] - r["reserved"]
        return (f"{r['sku']} {r['name']} in warehouse {r['warehouse']}: {r['on_hand']} on hand, {r['reserved']} "
                f"reserved, {available} available to order")

    return [
        Tool("order_status", "status of an order by its id, e.g. A1001", order_status,
             patterns=(r"订单|order", r"\b[A-Z]\d{3,}\b"),
             arguments=lambda q, e: {"order_id": m.group(0)} if (m := _ORDER_ID.search(q)) else None),
        Tool("stock", "stock of a product by its SKU, e.g. DK-200", stock,
             patterns=(r"库存|有货|in stock|stock|available|inventory",),
             arguments=lambda q, e: {"sku": m.group(0)} if (m := _SKU.search(q)) else None),
    ]
