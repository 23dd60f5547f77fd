#!/usr/bin/env python3
"""
A fake Kubernetes API server for running the operator's real kube-runtime controllers in
tests (operator/tests/it/controller_loop.rs). No kube-apiserver can be had on this machine.

Built on PyPI kmock 0.8's KubernetesEmulator (HTTP server, URL parsing, discovery, Status
errors, the `objects` store with history), with what kmock lacks added here: resourceVersion,
uid, creationTimestamp, generation bumps, JSON patch with Kubernetes' `test` semantics,
server-side apply as a merge with create-on-apply and field ownership (an apply without
force that changes a field another field manager owns is refused with 409 Conflict, which is
what leader election on a Lease relies on), the status subresource, PUT, label/field
selectors, resourceVersion-aware watches with bookmarks and timeouts, finalizers and
deletionTimestamp, and background garbage collection by ownerReferences.

Not modelled: strategic merge of lists by key, set-based selectors, validation, schemas,
foreground deletion, 410 Gone. It relies on kmock internals (`_serve_*`): kmock is pinned.

Usage: server.py PORT        (plain HTTP on 127.0.0.1:PORT, no auth; PORT 0 picks one)
The first line printed is `listening on http://127.0.0.1:<port>`.
"""
import asyncio
import copy
import datetime
import secrets
import sys
import uuid

import jsonpatch
import jsonpointer
import kmock

# 'group/version/plural' -> (kind, has a status subresource). Everything is namespaced here.
RESOURCES = {
    'repowire.io/v1alpha1/tenants': ('Tenant', True),
    'repowire.io/v1alpha1/apikeys': ('ApiKey', True),
    'v1/secrets': ('Secret', False),
    'v1/configmaps': ('ConfigMap', False),
    'v1/events': ('Event', False),
    'coordination.k8s.io/v1/leases': ('Lease', False),
    'events.k8s.io/v1/events': ('Event', False),
}
BOOKMARK_EVERY = 5.0  # seconds of silence on a watch before a BOOKMARK is sent (if allowed)
PROTECTED_META = ('name', 'namespace', 'uid', 'creationTimestamp', 'deletionTimestamp',
                  'deletionGracePeriodSeconds', 'generation', 'resourceVersion')


def fail(code: int, reason: str, message: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=code, reason=reason, message=message, details={'causes': []})


def merge(old, patch):
    """RFC 7386 JSON merge patch (also used, approximately, for strategic merge and apply)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(old) if isinstance(old, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


def json_patch(old, ops):
    """RFC 6902, but a `test` of null on a missing path passes (as the apiserver does)."""
    missing = object()
    ops = [op for op in ops if not (op.get('op') == 'test' and op.get('value') is None
                                     and jsonpointer.resolve_pointer(old, op['path'], missing) is missing)]
    try:
        return jsonpatch.apply_patch(old, ops, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
        raise fail(422, 'Invalid', f'the server rejected our request due to an error in our request: {e}')


def selected(obj, params) -> bool:
    """Equality-based labelSelector (k=v, k==v, k!=v, k, !k) and fieldSelector on metadata.name/namespace."""
    meta = obj.get('metadata', {})
    labels = meta.get('labels') or {}
    for term in filter(None, params.get('labelSelector', '').split(',')):
        if '!=' in term:
            k, v = term.split('!=', 1)
            ok = labels.get(k.strip()) != v.strip()
        elif '=' in term:
            k, v = term.replace('==', '=').split('=', 1)
            ok = labels.get(k.strip()) == v.strip()
        elif term.startswith('!'):
            ok = term[1:].strip() not in labels
        else:
            ok = term.strip() in labels
        if not ok:
            return False
    for term in filter(None, params.get('fieldSelector', '').split(',')):
        k, v = term.replace('==', '=').split('=', 1)
        field = {'metadata.name': meta.get('name'), 'metadata.namespace': meta.get('namespace')}.get(k)
        if field is not None and field != v:
            return False
    return True


def leaves(obj, prefix=()):
    """The paths of the leaf values of a patch (a `None` leaf is a removal)."""
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            yield from leaves(v, prefix + (k,))
    else:
        yield prefix, obj


def value_at(obj, path):
    for k in path:
        if not isinstance(obj, dict) or k not in obj:
            return None
        obj = obj[k]
    return obj


def prune(obj, path):
    """Removes the empty maps left along `path` after a field under it was removed."""
    for depth in range(len(path), 0, -1):
        parent = value_at(obj, path[:depth - 1]) if depth > 1 else obj
        if isinstance(parent, dict) and parent.get(path[depth - 1]) == {}:
            del parent[path[depth - 1]]


OWNED_IGNORED = {('apiVersion',), ('kind',), ('metadata', 'name'), ('metadata', 'namespace'),
                 ('metadata', 'resourceVersion')}  # a precondition, not a field anyone owns


def now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')


class FakeKube(kmock.KubernetesEmulator):

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()  # registers the LIST/WATCH/FETCH/CREATE/UPDATE/DELETE fallbacks
        self.fallback['put'] << self._serve_replace  # kmock has no PUT/replace at all
        for res, (kind, status) in RESOURCES.items():
            self.resources[res] = kmock.ResourceInfo(
                kind=kind, namespaced=True, subresources={'status'} if status else set(),
                verbs={'create', 'delete', 'get', 'list', 'patch', 'update', 'watch'})
        self.rv = 0
        self.owners = {}  # object key -> {field path: field manager}, as managedFields would
        self.log = []  # [(rv, key, event type, object)], append-only: watches replay from it
        self.changed = asyncio.Condition()

    # kmock's own _handle mutates the store before routing; skip that and route straight to the
    # reactions (user-defined ones first, then the fallbacks below that do the real work).
    async def _handle(self, request):
        return await kmock.KubernetesScaffold._handle(self, request)

    # --- helpers -------------------------------------------------------------------------------
    def _info(self, res):
        api_version = f'{res.group}/{res.version}' if res.group else res.version
        kind, status = RESOURCES.get(f'{api_version}/{res.plural}', (res.plural.capitalize(), False))
        return api_version, kind, status

    def _live(self, key):
        if key in self._objects and not self._objects[key].deleted:
            return copy.deepcopy(self._objects[key].raw)
        return None

    def _items(self, res, ns=None, name=None):
        for key, obj in list(self._objects.items()):
            if (key[0] == res and (ns is None or key[1] == ns) and (name is None or key[2] == name)
                    and not obj.deleted):
                yield key, copy.deepcopy(obj.raw)

    async def _commit(self, key, etype, obj):
        self.rv += 1
        obj['metadata']['resourceVersion'] = str(self.rv)
        if etype == 'DELETED':
            self._objects[key].delete()  # soft-delete: the history stays in self.objects
        elif key in self._objects:
            self._objects[key].create(copy.deepcopy(obj))  # appends a new version
        else:
            self._objects[key] = copy.deepcopy(obj)
        self.log.append((self.rv, key, etype, copy.deepcopy(obj)))
        async with self.changed:
            self.changed.notify_all()
        return obj

    def _key(self, request, name=None):
        return (request.resource, request.namespace, name or request.name)

    # --- verbs ---------------------------------------------------------------------------------
    async def _serve_fetch(self, request):
        obj = self._live(self._key(request))
        if obj is None:
            raise fail(404, 'NotFound', f'{request.resource.plural} "{request.name}" not found')
        return obj

    async def _serve_list(self, request):
        api_version, kind, _ = self._info(request.resource)
        items = [o for _, o in self._items(request.resource, request.namespace) if selected(o, request.params)]
        return {'apiVersion': api_version, 'kind': f'{kind}List',
                'metadata': {'resourceVersion': str(self.rv)}, 'items': items}

    async def _serve_create(self, request):
        return kmock.Response(status=201, payload=await self._create(request, copy.deepcopy(request.data)))

    async def _create(self, request, body):
        api_version, kind, status = self._info(request.resource)
        meta = body.setdefault('metadata', {})
        if not meta.get('name') and meta.get('generateName'):
            meta['name'] = meta['generateName'] + secrets.token_hex(3)[:5]
        if not meta.get('name'):
            raise fail(422, 'Invalid', 'metadata.name: Required value')
        key = (request.resource, request.namespace or meta.get('namespace'), meta['name'])
        if self._live(key) is not None:
            raise fail(409, 'AlreadyExists', f'{request.resource.plural} "{meta["name"]}" already exists')
        for field in ('deletionTimestamp', 'deletionGracePeriodSeconds', 'resourceVersion'):
            meta.pop(field, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
        if key[1]:
            meta['namespace'] = key[1]
        body.setdefault('apiVersion', api_version)
        body.setdefault('kind', kind)
        if status:
            body.pop('status', None)  # a status subresource: status is ignored on create
        return await self._commit(key, 'ADDED', body)

    async def _serve_update(self, request):  # PATCH
        ctype = request.headers.get('Content-Type', '')
        key = self._key(request)
        old = self._live(key)
        manager = request.params.get('fieldManager') or 'unknown'
        if old is None and 'apply-patch' in ctype and not request.subresource:
            created = await self._create(request, merge({'metadata': {'name': request.name}}, request.data))
            self._own(key, manager, request.data)
            return created
        if old is None:
            raise fail(404, 'NotFound', f'{request.resource.plural} "{request.name}" not found')
        if 'json-patch' in ctype:
            new = json_patch(old, request.data)
        else:  # merge-patch, strategic-merge-patch, apply-patch (all approximated as a merge)
            if 'apply-patch' in ctype and request.params.get('force') != 'true':
                self._check_ownership(request, key, old, manager)
            new = merge(old, request.data)
            if 'apply-patch' in ctype:
                self._drop_unapplied(request, key, new, manager)
        written = await self._write(request, key, old, new)
        if 'json-patch' not in ctype:
            self._own(key, manager, request.data)
        return written

    def _check_ownership(self, request, key, old, manager):
        """Server-side apply without force: changing a field another manager owns is a conflict."""
        owners = self.owners.get(key, {})
        clashes = [(path, owners[path]) for path, value in leaves(request.data)
                   if path not in OWNED_IGNORED and owners.get(path) not in (None, manager)
                   and value_at(old, path) != value]
        if clashes:
            raise fail(409, 'Conflict', f'Apply failed with {len(clashes)} conflict(s): ' + ', '.join(
                f'conflict with "{who}": .{".".join(path)}' for path, who in clashes))

    def _drop_unapplied(self, request, key, new, manager):
        """Server-side apply: a field this manager applied before and leaves out now is removed
        (the apply is the manager's whole intent), unless another manager owns it too."""
        owners = self.owners.get(key, {})
        applied = {path for path, _ in leaves(request.data)}
        on_status = request.subresource == 'status'
        for path in [p for p, m in owners.items() if m == manager and p not in applied]:
            if (path[:1] == ('status',)) != on_status:
                continue  # the other endpoint's fields are not this apply's business
            if any(path[:len(a)] == a or a[:len(path)] == path for a in applied):
                continue
            parent = new
            for k in path[:-1]:
                parent = parent.get(k) if isinstance(parent, dict) else None
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
            del owners[path]
            prune(new, path[:-1])

    def _own(self, key, manager, patch):
        """The fields a write sets belong to its manager; a field it removes belongs to no one."""
        owners = self.owners.setdefault(key, {})
        for path, value in leaves(patch):
            if path in OWNED_IGNORED:
                continue
            for owned in [p for p in owners if p[:len(path)] == path]:
                del owners[owned]
            if value is not None:
                owners[path] = manager

    async def _serve_replace(self, request):  # PUT
        key = self._key(request)
        old = self._live(key)
        if request.resource is None or request.name is None or old is None:
            raise fail(404, 'NotFound', f'{request.url.path} not found')
        return await self._write(request, key, old, copy.deepcopy(request.data))

    async def _write(self, request, key, old, new):
        api_version, kind, status = self._info(request.resource)
        new.setdefault('apiVersion', api_version)
        new.setdefault('kind', kind)
        meta = new.setdefault('metadata', {})
        if meta.get('resourceVersion') not in (None, old['metadata']['resourceVersion']):
            raise fail(409, 'Conflict', f'Operation cannot be fulfilled on {request.resource.plural} '
                                        f'"{request.name}": the object has been modified; '
                                        'please apply your changes to the latest version and try again')
        if request.subresource == 'status':
            new = dict(old, status=new.get('status'))
            meta = new['metadata']
        elif status:
            new['status'] = old.get('status')
        if new.get('status') is None:
            new.pop('status', None)
        for field in PROTECTED_META:
            if field in old['metadata']:
                meta[field] = old['metadata'][field]
            else:
                meta.pop(field, None)
        if new == old:
            return old  # a no-op: no new resourceVersion, no watch event
        strip = lambda o: {k: v for k, v in o.items() if k not in ('metadata', 'status')}
        if strip(new) != strip(old):
            meta['generation'] = old['metadata'].get('generation', 0) + 1
        if meta.get('deletionTimestamp') and not meta.get('finalizers'):
            return await self._remove(key, new)
        return await self._commit(key, 'MODIFIED', new)

    async def _serve_delete(self, request):
        return await self._delete(self._key(request))

    async def _delete(self, key):
        old = self._live(key)
        if old is None:
            raise fail(404, 'NotFound', f'{key[0].plural} "{key[2]}" not found')
        if old['metadata'].get('finalizers'):
            if old['metadata'].get('deletionTimestamp'):
                return old
            old['metadata'].update(deletionTimestamp=now(), deletionGracePeriodSeconds=0)
            return await self._commit(key, 'MODIFIED', old)
        return await self._remove(key, old)

    async def _remove(self, key, obj):
        obj = await self._commit(key, 'DELETED', obj)
        self.owners.pop(key, None)
        uid = obj['metadata'].get('uid')
        for other_key, other in [(k, o) for res in self.resources for k, o in self._items(res)]:
            if any(ref.get('uid') == uid for ref in other['metadata'].get('ownerReferences') or []):
                await self._delete(other_key)  # background cascading deletion
        return obj

    async def _serve_watch(self, request):
        p = request.params
        api_version, kind, _ = self._info(request.resource)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(p.get('timeoutSeconds') or 1800)
        bookmarks = p.get('allowWatchBookmarks') == 'true'
        since = p.get('resourceVersion') or '0'

        def wanted(key, obj):
            return (key[0] == request.resource and request.namespace in (None, key[1])
                    and request.name in (None, key[2]) and selected(obj, p))

        def bookmark():
            return {'type': 'BOOKMARK', 'object': {'apiVersion': api_version, 'kind': kind,
                                                   'metadata': {'resourceVersion': str(self.rv)}}}

        yield b''  # send the headers at once, as a real apiserver does
        if since == '0':  # "any version": the current state as synthetic ADDED events, then changes
            pos = len(self.log)
            for key, obj in self._items(request.resource, request.namespace, request.name):
                if wanted(key, obj):
                    yield {'type': 'ADDED', 'object': obj}
        else:  # replay everything after `since` (the log is never compacted, so never 410 Gone)
            pos = next((i for i, entry in enumerate(self.log) if entry[0] > int(since)), len(self.log))
        while True:
            while pos < len(self.log):
                _, key, etype, obj = self.log[pos]
                pos += 1
                if wanted(key, obj):
                    yield {'type': etype, 'object': obj}
            remaining = deadline - loop.time()
            if remaining <= 0:
                return  # ends the chunked response; kube-runtime re-watches from its last version
            try:
                async with self.changed:
                    await asyncio.wait_for(self.changed.wait_for(lambda: pos < len(self.log)),
                                           min(remaining, BOOKMARK_EVERY))
            except TimeoutError:
                if bookmarks:
                    yield bookmark()


async def main(port: int) -> None:
    fake = FakeKube()
    async with fake, kmock.Server(fake, host='127.0.0.1', port=port or None) as server:
        print(f'listening on http://127.0.0.1:{server.port}', flush=True)
        await asyncio.Event().wait()


if __name__ == '__main__':
    asyncio.run(main(int(sys.argv[1])))
