"""Order and stock lookups over the example shop database, as named, parameterised queries."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel

from ..core import Evidence
from ._registry import OffTool, Tool
from ._sql import SQLDatabase, named_query

_ORDER_ID = re.compile(r"\b[A-Z]\d{3,}\b")
_SKU = re.compile(r"\b[A-Z]{2,4}-\d{2,}\b")


Code = Annotated[str, AfterValidator(lambda value: value.strip().upper())]  # a1002 and A1002 are one order


class _Order(BaseModel):
    order_id: Code


class _Product(BaseModel):
    sku: Code


def _order(rows: list[dict]) -> str:
    r = rows[0]
    shipped = f", shipped on {r['ship_date']}" if r["ship_date"] else ""
    return (f"order {r['order_id']}: {r['quantity']} x {r['sku']} for {r['customer']}, placed {r['order_date']}, "
            f"status {r['status']}{shipped}")


def _stock(rows: list[dict]) -> str:
    r = rows[0]
    return (f"{r['sku']} {r['name']} in warehouse {r['warehouse']}: {r['on_hand']} on hand, {r['reserved']} reserved, "
            f"{r['on_hand'] - r['reserved']} available to order")


# what selects each lookup for a question, and finds its argument: shared by the tools and their off forms
ORDER_PATTERNS = (r"订单|order", r"\b[A-Z]\d{3,}\b")
STOCK_PATTERNS = (r"库存|有货|in stock|stock|available|inventory",)


def _order_id(question: str, evidence: list[Evidence]) -> dict | None:
    return {"order_id": m.group(0)} if (m := _ORDER_ID.search(question)) else None


def _sku(question: str, evidence: list[Evidence]) -> dict | None:
    return {"sku": m.group(0)} if (m := _SKU.search(question)) else None


def shop_tools(db_path: str | Path) -> list[Tool]:
    """`order_status(order_id)` and `stock(sku)` over the given database."""
    db = SQLDatabase(db_path)
    return [
        named_query(db, "order_status", "status of an order by its id, e.g. A1001",
                    "SELECT * FROM orders WHERE order_id = :order_id", _Order, ORDER_PATTERNS, _order_id,
                    _order, empty="no order {order_id!r} in the database"),
        named_query(db, "stock", "stock of a product by its SKU, e.g. DK-200",
                    "SELECT * FROM inventory WHERE sku = :sku", _Product, STOCK_PATTERNS, _sku,
                    _stock, empty="no product with SKU {sku!r} in the database"),
    ]


def shop_tools_off(how: str = "run with --db FILE", how_zh: str = "加上 --db FILE 运行") -> list[OffTool]:
    """order_status and stock as a run without the shop database has them: a question the router
    would send to one is answered from the knowledge base, with a line saying the database tool is
    off and `how` to turn it on (`how_zh` in a Chinese answer)."""
    return [
        OffTool("order_status", {"en": f"(the database tool is off: {how} to look up live orders)",
                                 "zh": f"（数据库工具未开启：{how_zh}才能查询实时订单）"}, ORDER_PATTERNS, _order_id),
        OffTool("stock", {"en": f"(the database tool is off: {how} to query live stock)",
                          "zh": f"（数据库工具未开启：{how_zh}才能查询实时库存）"}, STOCK_PATTERNS, _sku),
    ]
