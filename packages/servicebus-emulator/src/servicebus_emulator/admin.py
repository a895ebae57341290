"""The management API on the emulator's HTTP port, as Microsoft's emulator serves it for the
SDKs' administration clients: Atom entries and feeds for queues, topics, subscriptions and
rules (get, list, create, update, delete; runtime properties are in the descriptions) and the
namespace's properties.

    GET               /$namespaceinfo
    GET               /$Resources/queues | /$Resources/topics        ($skip, $top)
    GET PUT DELETE    /{queue or topic}
    GET               /{topic}/subscriptions
    GET PUT DELETE    /{topic}/subscriptions/{subscription}
    GET               /{topic}/subscriptions/{subscription}/rules
    GET PUT DELETE    /{topic}/subscriptions/{subscription}/rules/{rule}

A PUT with ``If-Match: *`` updates, any other PUT creates (409 when the entity exists). Like
Service Bus, a GET of a queue or topic that does not exist answers an empty feed, which the SDKs
report as not found; the other misses are a 404.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import atom
from .atom import AtomError
from .catalog import RULE, Catalog, ManagementError
from .clock import now_ms
from .descriptions import render_entity, render_rule
from .entities import QUEUE, SUBSCRIPTION, TOPIC, Entity
from .http_server import Request, Response

if TYPE_CHECKING:
    from .broker import Broker

ATOM_TYPE = "application/atom+xml; type=entry; charset=utf-8"
FEED_TYPE = "application/atom+xml; type=feed; charset=utf-8"
STARTED = now_ms()


class Management:
    def __init__(self, broker: Broker, base_url: str) -> None:
        self.broker = broker
        self.catalog: Catalog = broker.catalog
        self.base_url = base_url

    def handle(self, request: Request) -> Response:
        parts = [part for part in request.path.strip("/").split("/") if part]
        try:
            return self._route(request, parts)
        except ManagementError as failure:
            return _error(failure.status, failure.detail)
        except AtomError as failure:
            return _error(400, str(failure))

    def _route(self, request: Request, parts: list[str]) -> Response:
        method = request.method
        lower = [part.lower() for part in parts]
        if lower == ["$namespaceinfo"] and method == "GET":
            return self._namespace()
        if len(parts) == 2 and lower[0] == "$resources" and method == "GET":
            if lower[1] == "queues":
                return self._list(request, "$Resources/Queues", "Queues", self._queues())
            if lower[1] == "topics":
                return self._list(request, "$Resources/Topics", "Topics", self._topics())
            raise ManagementError(404, f"There are no entities of type '{parts[1]}'.")
        if len(parts) == 1:
            return self._entity(request, parts[0])
        if len(parts) >= 2 and lower[1] == "subscriptions":
            if len(parts) == 2 and method == "GET":
                topic = self.catalog.topic(parts[0])
                subs = [_item(s) for s in topic.subscriptions.values()]
                return self._list(request, f"{parts[0]}/Subscriptions", "Subscriptions", subs)
            if len(parts) == 3:
                return self._change(request, SUBSCRIPTION, [parts[0], parts[2]])
            if len(parts) >= 4 and lower[3] == "rules":
                subscription = self.catalog.subscription(parts[0], parts[2])
                if len(parts) == 4 and method == "GET":
                    path = f"{subscription.name}/Rules"
                    rules = [
                        (f"{path}/{r.name}", r.name, render_rule(r), r.created_at)
                        for r in subscription.rules.values()
                    ]
                    return self._list(request, path, "Rules", rules)
                if len(parts) == 5:
                    return self._change(request, RULE, [parts[0], parts[2], parts[4]])
        raise ManagementError(
            404, f"No management operation at '{request.method} /{request.path}'."
        )

    def _entity(self, request: Request, name: str) -> Response:
        if request.method == "GET":
            found = self.catalog.queue_or_topic(name)
            if found is None:  # Service Bus's way of saying "no such entity"
                return Response(200, atom.document(atom.feed(self.base_url, name, name, [])),
                                FEED_TYPE)  # fmt: skip
            return self._entity_entry(found)
        if request.method == "DELETE":
            found = self.catalog.queue_or_topic(name)
            if found is None:
                raise ManagementError(404, f"The messaging entity '{name}' could not be found.")
            self.catalog.delete(found.kind, [name])
            return Response(200)
        kind = TOPIC if b"TopicDescription" in request.body else QUEUE
        return self._change(request, kind, [name])

    def _change(self, request: Request, kind: str, path: list[str]) -> Response:
        if request.method == "GET":
            if kind == RULE:
                return self._rule_entry(path)
            return self._entity_entry(self.catalog.subscription(path[0], path[1]))
        if request.method == "DELETE":
            self.catalog.delete(kind, path)
            return Response(200)
        if request.method != "PUT":
            raise ManagementError(405, f"{request.method} is not a management operation.")
        update = request.headers.get("if-match", "").strip() == "*"
        result = self.catalog.put(kind, path, request.body, update=update)
        response = (
            self._entity_entry(result) if isinstance(result, Entity) else self._rule_entry(path)
        )
        response.status = 200 if update else 201
        return response

    def _entity_entry(self, entity: Entity) -> Response:
        return self._entry(entity.name, entity.short_name, render_entity(entity), entity.updated_at)

    def _rule_entry(self, path: list[str]) -> Response:
        rule = self.catalog.subscription(path[0], path[1]).rules.get(path[2])
        if rule is None:
            raise ManagementError(404, f"The rule '{'/'.join(path)}' could not be found.")
        location = f"{path[0]}/Subscriptions/{path[1]}/Rules/{rule.name}"
        return self._entry(location, rule.name, render_rule(rule), rule.created_at)

    def _entry(self, path: str, title: str, content: str, updated: int) -> Response:
        """One entry; its id is the entity's URL, from which the SDKs read the names."""
        body = atom.entry(self.base_url, path, title, content, updated=updated)
        return Response(200, atom.document(body), ATOM_TYPE)

    def _list(self, request: Request, path: str, title: str, items: list[Item]) -> Response:
        skip = _number(request.query.get("$skip"), 0)
        top = _number(request.query.get("$top"), 100)
        entries = [
            atom.entry(self.base_url, location, name, content, updated=updated)
            for location, name, content, updated in items[skip : skip + top]
        ]
        body = atom.feed(self.base_url, path, title, entries)
        if skip + top < len(items):  # the SDKs page on by the second link
            following = f"{self.base_url}/{path}?$skip={skip + top}&amp;$top={top}"
            body = body.replace("</feed>", f'<link rel="next" href="{following}"/></feed>')
        return Response(200, atom.document(body), FEED_TYPE)

    def _queues(self) -> list[Item]:
        return [_item(q) for q in sorted(self.broker.entities.queues.values(), key=_by_name)]

    def _topics(self) -> list[Item]:
        return [_item(t) for t in sorted(self.broker.entities.topics.values(), key=_by_name)]

    def _namespace(self) -> Response:
        stamp = atom.instant(STARTED)
        content = (
            f'<NamespaceInfo xmlns="{atom.CONNECT}" xmlns:i="{atom.INSTANCE}">'
            f"<CreatedTime>{stamp}</CreatedTime><MessagingSKU>Standard</MessagingSKU>"
            f"<MessagingUnits>1</MessagingUnits><ModifiedTime>{stamp}</ModifiedTime>"
            "<Name>sbemulatorns</Name><NamespaceType>Messaging</NamespaceType></NamespaceInfo>"
        )
        body = atom.entry(self.base_url, "$namespaceinfo", "sbemulatorns", content)
        return Response(200, atom.document(body), ATOM_TYPE)


Item = tuple[str, str, str, int]  # path, name, description, updated


def _item(entity: Entity) -> Item:
    return entity.name, entity.short_name, render_entity(entity), entity.updated_at


def _by_name(entity: Entity) -> str:
    return entity.name.lower()


def _number(value: str | None, default: int) -> int:
    if value is None:
        return default
    if not value.isdigit() or len(value) > 9:
        raise ManagementError(400, f"$skip and $top must be whole numbers, not {value[:20]!r}")
    return int(value)


def _error(status: int, detail: str) -> Response:
    return Response(status, atom.document(atom.error(status, detail)))
