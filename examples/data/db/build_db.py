"""Build shop.sqlite from orders.csv and inventory.csv (run again after editing the CSVs)."""
import csv
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).parent
SCHEMA = """
CREATE TABLE orders (order_id TEXT PRIMARY KEY, customer TEXT, sku TEXT, quantity INTEGER,
                     status TEXT, order_date TEXT, ship_date TEXT);
CREATE TABLE inventory (sku TEXT PRIMARY KEY, name TEXT, warehouse TEXT, on_hand INTEGER,
                        reserved INTEGER);
"""


def build(target: Path) -> Path:
    """Write the database to `target` (replacing it atomically) and return its path."""
    pending = target.with_suffix(".tmp")
    pending.unlink(missing_ok=True)
    with sqlite3.connect(pending) as db:
        db.executescript(SCHEMA)
        for table in ("orders", "inventory"):
            with open(HERE / f"{table}.csv", newline="", encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
            columns = list(rows[0])
            db.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                           [[row[c] or None for c in columns] for row in rows])
    db.close()
    pending.replace(target)
    return target


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "shop.sqlite"))
