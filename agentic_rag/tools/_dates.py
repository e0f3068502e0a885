"""Dates: today, weekdays, business days with a holiday list, and the earliest ship date under a
warehouse's cut-off rule, with its arguments read from retrieved evidence. The clock is injected."""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import date, datetime, time, timedelta

from pydantic import BaseModel

from ..core import Evidence, ToolError
from ._registry import Tool

_WEEKDAYS_ZH = "一二三四五六日"
_RANGE = re.compile(r"(\d{4}-\d{2}-\d{2})\s*(?:至|到|to|-|–|~)\s*(\d{4}-\d{2}-\d{2})")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_CUTOFF = re.compile(r"(?:截单|cut-?off)[^0-9]{0,20}?(\d{1,2}:\d{2})"      # 截单时间 15:00
                     r"|(\d{1,2}:\d{2})[^。.\n]{0,30}(?:截单|cut-?off)", re.I)  # 15:00 截单


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ToolError(f"{text!r} is not a date; write YYYY-MM-DD") from None


def holidays_in(text: str) -> list[str]:
    """Every date the text lists, ranges ("2026-10-01 至 2026-10-07") expanded."""
    days: set[str] = set()
    for start, end in _RANGE.findall(text):
        first, last = _day(start), _day(end)
        days.update(str(first + timedelta(n)) for n in range((last - first).days + 1) if (last - first).days < 60)
    days.update(_DAY.findall(_RANGE.sub(" ", text)))
    return sorted(days)


def is_business_day(day: date, holidays: set[str]) -> bool:
    """Monday to Friday, and not a holiday."""
    return day.weekday() < 5 and str(day) not in holidays


def add_business_days(start: str, days: int, holidays: Sequence[str] = ()) -> str:
    """The date `days` business days after `start` (YYYY-MM-DD), skipping weekends and holidays."""
    if not 0 <= days <= 366:
        raise ToolError(f"days = {days}: use 0 to 366")
    day, off = _day(start), set(holidays)
    while days:
        day += timedelta(1)
        days -= is_business_day(day, off)
    return str(day)


def _label(day: date) -> str:
    return f"{day}（周{_WEEKDAYS_ZH[day.weekday()]}, {day:%A}）"


def earliest_ship_date(now: str, cutoff: str = "15:00", holidays: Sequence[str] = (), extra_days: int = 0) -> str:
    """Orders on a business day before the cut-off ship that day; later ones the next business day."""
    try:
        moment, limit = datetime.fromisoformat(now), time.fromisoformat(cutoff)
    except ValueError:
        raise ToolError(f"now {now!r} or cutoff {cutoff!r} is not ISO (YYYY-MM-DDTHH:MM, HH:MM)") from None
    off = set(holidays)
    day = moment.date()
    if not (is_business_day(day, off) and moment.time() < limit):
        day = _day(add_business_days(str(day), 1, list(off)))
    day = _day(add_business_days(str(day), extra_days, list(off)))
    return (f"按仓库发货规则（截单 {cutoff}，工作日发货，节假日顺延），"
            f"{moment:%Y-%m-%d %H:%M} 下单，最早发出日期：{_label(day)}。"
            f" Ordered {moment:%Y-%m-%d %H:%M}, the earliest ship date under the {cutoff} cut-off is {day}.")


class _Ship(BaseModel):
    now: str
    cutoff: str = "15:00"
    holidays: list[str] = []
    extra_days: int = 0


class _Add(BaseModel):
    start: str
    days: int
    holidays: list[str] = []


def date_tools(clock: Callable[[], datetime] = datetime.now) -> list[Tool]:
    """`today`, `add_business_days` and `earliest_ship_date`; the clock is injectable for repeatable runs."""
    def ship_arguments(question: str, evidence: list[Evidence]) -> dict | None:
        rules = next((m for item in evidence for m in [_CUTOFF.search(item["text"])] if m), None)
        if rules is None:
            return None  # the cut-off comes from the evidence: first retrieve the rules
        holidays = sorted({d for item in evidence if re.search(r"节假日|holiday", item["text"], re.I)
                           for d in holidays_in(item["text"])})
        return {"now": clock().strftime("%Y-%m-%dT%H:%M"), "cutoff": rules.group(1) or rules.group(2),
                "holidays": holidays}

    def today() -> str:
        now = clock()
        return f"今天是 {_label(now.date())}，现在 {now:%H:%M}。 Today is {now:%Y-%m-%d}, {now:%A}."

    return [
        Tool("earliest_ship_date", "earliest ship date of an order placed now, by the warehouse cut-off and holidays",
             earliest_ship_date, patterns=(r"(?:今天|现在|马上|today|now).{0,12}(?:下单|订购|order)",
                                           r"最早.{0,8}(?:发出|发货)|earliest.{0,20}ship"),
             arguments=ship_arguments, parameters=_Ship),
        Tool("today", "today's date and weekday", today,
             patterns=(r"今天(?:是)?几[号月]|今天星期几|today's date|what day is (?:it|today)",), parameters=None),
        Tool("add_business_days", "a date some business days after another, skipping weekends and holidays",
             add_business_days, arguments=lambda q, e: None, parameters=_Add),
    ]
