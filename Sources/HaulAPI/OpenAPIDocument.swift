// Generated from openapi.yaml by scripts/embed.sh (make embed). Do not edit.
enum OpenAPIDocument {
    static let yaml = #"""
openapi: 3.1.0
info:
  title: Haul
  version: 0.1.0
  summary: A self-hosted download server.
  description: |
    Hand Haul a URL; it probes the file, downloads it with resumable Range requests into
    `<name>.part`, and gives it its final name only when every byte is there.
    All bodies are JSON with snake_case fields; times are RFC 3339 UTC; sizes are bytes.
    Errors are `application/problem+json` (RFC 9457). A JSON body that gives one name twice in an object, and a
    query that gives one parameter twice, are refused with 400: which one counts would be a guess.

    With `--token` (or `HAUL_TOKEN`) every route but `/healthz` and the dashboard (`/`, `/ui/*`) needs
    `Authorization: Bearer <token>`. Event streams and files, which browsers open without headers, also take
    `?ticket=` (from `POST /tickets`: it opens one path for a minute, so the token stays out of URLs, logs and
    history) or `?access_token=`. Every answer carries `Referrer-Policy: no-referrer`. Without a token (loopback only,
    unless `--allow-unauthenticated`) no credentials are needed. Requests whose `Host` the server does not answer
    to, and state changes from a browser origin other than the server's own and those given in `--cors-origin`,
    get 403.
  license:
    name: MIT
servers:
  - url: http://127.0.0.1:8080
security:
  - bearer: []
  - {}
paths:
  /:
    get:
      x-haul-operation: server.dashboard
      x-haul-scope: none
      operationId: dashboard
      summary: The web dashboard.
      description: |
        A page (HTML, CSS and JavaScript compiled into the server, nothing fetched from elsewhere) that lists the
        downloads with progress, speed, ETA, size, state and error, follows `/events`, adds, pauses, resumes,
        retries and removes. The page itself needs no token; it asks for one when the API answers 401 and keeps it
        in the browser's local storage.
      security: []
      parameters:
        - $ref: "#/components/parameters/IfNoneMatch"
      responses:
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "304": { $ref: "#/components/responses/NotModified" }
        "200":
          description: The page.
          headers:
            ETag: { $ref: "#/components/headers/ETag" }
            Content-Security-Policy: { schema: { type: string } }
          content:
            text/html:
              schema: { type: string }
  /ui/app.js:
    get:
      x-haul-operation: server.dashboard
      x-haul-scope: none
      operationId: dashboardScript
      summary: The dashboard's script.
      security: []
      parameters:
        - $ref: "#/components/parameters/IfNoneMatch"
      responses:
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "304": { $ref: "#/components/responses/NotModified" }
        "200":
          description: The script.
          headers:
            ETag: { $ref: "#/components/headers/ETag" }
          content:
            text/javascript:
              schema: { type: string }
  /ui/app.css:
    get:
      x-haul-operation: server.dashboard
      x-haul-scope: none
      operationId: dashboardStyle
      summary: The dashboard's style sheet.
      security: []
      parameters:
        - $ref: "#/components/parameters/IfNoneMatch"
      responses:
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "304": { $ref: "#/components/responses/NotModified" }
        "200":
          description: The style sheet.
          headers:
            ETag: { $ref: "#/components/headers/ETag" }
          content:
            text/css:
              schema: { type: string }
  /downloads:
    get:
      x-haul-operation: downloads.list
      x-haul-scope: read
      operationId: listDownloads
      summary: List downloads, in creation order or another.
      description: |
        Filtered by `state` and by `q` (a search of the name and the URL, without case), sorted by `sort`. Pages
        follow `next_cursor`: in creation order it is the last download's sequence number, stable while downloads
        come and go; in another order it is a position (`o200`) in that order as it stands at each request. Any
        other query parameter is refused (400).
      parameters:
        - name: state
          in: query
          description: Only downloads in these states, comma-separated (e.g. `downloading,queued`).
          schema: { type: string, pattern: "^(queued|probing|downloading|verifying|completed|paused|failed)(,(queued|probing|downloading|verifying|completed|paused|failed))*$" }
        - name: limit
          in: query
          schema: { type: integer, minimum: 1, maximum: 1000, default: 100 }
        - name: cursor
          in: query
          description: |
            The `next_cursor` of the previous page of the same order: in creation order a sequence number, in
            another a position (`o200`, or the bare number).
          schema: { type: string, pattern: "^([0-9]{1,18}|o[0-9]{1,9})$" }
        - name: q
          in: query
          description: Only downloads whose name or URL holds this text, without case (a URL's password is not searched).
          schema: { type: string, minLength: 1, maxLength: 200 }
        - name: category
          in: query
          description: Only the downloads of this category.
          schema: { $ref: "#/components/schemas/CategoryName" }
        - name: sort
          in: query
          description: The order, `-` before it for descending; ties in creation order.
          schema: { type: string, enum: [created, -created, name, -name, size, -size, progress, -progress, speed, -speed] }
        - name: changed_since
          in: query
          description: |
            A `sequence` from an earlier answer: only the downloads changed after it, plus the ids removed
            after it (`removed`). When removals that old are forgotten the full list comes back with `reset: true`.
            A download may appear in two consecutive deltas; treat them as upserts.
          schema: { type: integer, minimum: 0, maximum: 9223372036854775807 }
        - $ref: "#/components/parameters/IfNoneMatch"
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: One page of downloads.
          headers:
            ETag: { $ref: "#/components/headers/ETag" }
          content:
            application/json:
              schema: { $ref: "#/components/schemas/DownloadList" }
        "304": { $ref: "#/components/responses/NotModified" }
        "422": { $ref: "#/components/responses/Invalid" }
    post:
      x-haul-operation: downloads.add
      x-haul-scope: add
      operationId: addDownload
      summary: Add a download, or up to 1,000 at once.
      description: |
        One download (`NewDownload`): answers 201 with the new download, or 200 with the existing one when the
        same URL is already being downloaded to the same place. With an `Idempotency-Key`, a repeated request gets
        the first answer's status and the download as it is now.

        A batch (`{"downloads": [...]}`, 1 to 1,000): every element is checked and added on its own, stored with
        one commit, and the answer (200, a `BatchAnswer`) lists each one's result in order: `status` 201 and the
        `download`, 200 and the existing unfinished one (also for the same URL and destination twice in one batch),
        or a problem's status and the `problem` (422 invalid fields, 507 no room). With `"atomic": true` it is all
        or nothing: 201 and the same list when every element was added, else the problem of the first refusal
        (422 with fields like `downloads[3].url`, or 507) and nothing added; its `results` tell each element's fate,
        424 for those refused only because another was. An `Idempotency-Key` on a batch answers a repeat with the
        first answer, each download as it is now.
      parameters:
        - name: Idempotency-Key
          in: header
          description: Makes retrying the POST safe; 1 to 255 characters, remembered across restarts.
          schema: { type: string, minLength: 1, maxLength: 255, pattern: "^[^\\r\\n]*$" }
      requestBody:
        required: true
        content:
          application/json:
            schema:
              oneOf:
                - { $ref: "#/components/schemas/NewDownload" }
                - { $ref: "#/components/schemas/NewDownloadBatch" }
      responses:
        "503": { $ref: "#/components/responses/StoreUnavailable" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "507": { $ref: "#/components/responses/TooManyDownloads" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "201":
          description: Added (for an atomic batch, every element).
          headers:
            Location:
              description: The new download's URL (one download only).
              schema: { type: string }
          content:
            application/json:
              schema:
                oneOf:
                  - { $ref: "#/components/schemas/Download" }
                  - { $ref: "#/components/schemas/BatchAnswer" }
        "200":
          description: |
            The same URL to the same destination is already there and unfinished; or a batch's answer, element by
            element.
          headers:
            Location:
              schema: { type: string }
          content:
            application/json:
              schema:
                oneOf:
                  - { $ref: "#/components/schemas/Download" }
                  - { $ref: "#/components/schemas/BatchAnswer" }
        "400": { $ref: "#/components/responses/Malformed" }
        "409":
          description: The Idempotency-Key was used with a different request, or its download was removed; or the `category` does not exist.
          content:
            application/problem+json:
              schema: { $ref: "#/components/schemas/Problem" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "422": { $ref: "#/components/responses/Invalid" }
    delete:
      x-haul-operation: downloads.removeMatching
      x-haul-scope: manage
      operationId: removeDownloads
      summary: Removes every download in some states, of one category or of all (a clean-up).
      description: |
        Each as `DELETE /downloads/{id}` would: an unfinished one is stopped and its part file deleted; a finished
        file stays unless `delete_file=true`. `state` is required, so that nothing is removed by accident.
      parameters:
        - name: category
          in: query
          description: Only the downloads of this category.
          schema: { $ref: "#/components/schemas/CategoryName" }
        - name: state
          in: query
          required: true
          description: The states of the downloads to remove, comma-separated (e.g. `completed,failed`).
          schema: { type: string, pattern: "^(queued|probing|downloading|verifying|completed|paused|failed)(,(queued|probing|downloading|verifying|completed|paused|failed))*$" }
        - name: delete_file
          in: query
          schema: { type: boolean, default: false }
      responses:
        "503": { $ref: "#/components/responses/StoreUnavailable" }
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: The ids removed.
          content:
            application/json:
              schema:
                type: object
                required: [removed]
                properties:
                  removed: { type: array, items: { type: string } }
        "422": { $ref: "#/components/responses/Invalid" }
  /downloads/actions:
    post:
      x-haul-operation: downloads.act
      x-haul-scope: add
      operationId: downloadActions
      summary: Pause, resume or remove many downloads at once.
      description: |
        The downloads named in `ids`, or every one in a `state` (`{"action": "remove", "state": ["completed"]}`
        clears the finished ones), each answered on its own, as `PATCH` and `DELETE /downloads/{id}` would:
        200 with the download, 204 removed, or its problem (404, 409).
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/DownloadAction" }
      responses:
        "503": { $ref: "#/components/responses/StoreUnavailable" }
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "422": { $ref: "#/components/responses/Invalid" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: Each download's result.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/ActionAnswer" }
  /downloads/{id}/file:
    parameters:
      - name: id
        in: path
        required: true
        schema: { type: string }
    get:
      x-haul-operation: downloads.file
      x-haul-scope: read
      operationId: downloadFile
      summary: The finished file.
      description: |
        The file of a completed download, as an attachment (`Content-Disposition` with the name, `filename*` for
        one beyond ASCII; `?download=0` for `inline`). One byte range (`Range: bytes=...`, `If-Range` with the
        `ETag` or `Last-Modified`) answers 206; several get the whole file. The type is the origin's only for
        images, audio, video, PDF and archives, else `application/octet-stream`, with `nosniff` and a sandboxing
        Content-Security-Policy: nothing in a file runs in this origin. Served only while the file is still the one
        Haul wrote, the device, inode and size recorded at completion: a link, another hard link or another file in
        its place, or the file grown or cut, is refused (409); a file deleted by hand is 410. With a
        token, a browser's link carries a `?ticket=` for this path (`POST /tickets`).
      parameters:
        - name: download
          in: query
          schema: { type: string, enum: ["0", "1"], default: "1" }
        - $ref: "#/components/parameters/Ticket"
        - $ref: "#/components/parameters/AccessToken"
        - name: Range
          in: header
          schema: { type: string }
        - name: If-Range
          in: header
          schema: { type: string }
        - $ref: "#/components/parameters/IfNoneMatch"
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "404": { $ref: "#/components/responses/NotFound" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "422": { $ref: "#/components/responses/Invalid" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "304": { $ref: "#/components/responses/NotModified" }
        "409":
          description: The download is not completed, or what has its name is not the file Haul wrote.
          content:
            application/problem+json:
              schema: { $ref: "#/components/schemas/Problem" }
        "410":
          description: The file was deleted.
          content:
            application/problem+json:
              schema: { $ref: "#/components/schemas/Problem" }
        "416":
          description: "The range starts past the end (`Content-Range: bytes */SIZE`)."
          content:
            application/problem+json:
              schema: { $ref: "#/components/schemas/Problem" }
        "200":
          description: The whole file.
          headers:
            ETag: { $ref: "#/components/headers/ETag" }
            Content-Disposition: { schema: { type: string } }
          content:
            application/octet-stream:
              schema: { type: string, format: binary }
        "206":
          description: "One range of it (`Content-Range`)."
          content:
            application/octet-stream:
              schema: { type: string, format: binary }
  /downloads/{id}:
    parameters:
      - name: id
        in: path
        required: true
        schema: { type: string }
    get:
      x-haul-operation: downloads.get
      x-haul-scope: read
      operationId: getDownload
      summary: One download.
      parameters:
        - $ref: "#/components/parameters/IfNoneMatch"
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: The download.
          headers:
            ETag: { $ref: "#/components/headers/ETag" }
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Download" }
        "304": { $ref: "#/components/responses/NotModified" }
        "404": { $ref: "#/components/responses/NotFound" }
    patch:
      x-haul-operation: downloads.change
      x-haul-scope: add
      operationId: updateDownload
      summary: Pause, resume or retry a download, or change its priority, speed limit or connections.
      description: |
        `{"state": "paused"}` stops the transfer and keeps the part file. `{"state": "queued"}` resumes a paused
        download or retries a failed one, continuing from the bytes already received when the server allows it.
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/DownloadPatch" }
      responses:
        "503": { $ref: "#/components/responses/StoreUnavailable" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: The download after the change.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Download" }
        "400": { $ref: "#/components/responses/Malformed" }
        "404": { $ref: "#/components/responses/NotFound" }
        "409":
          description: The change is impossible in the download's current state (e.g. pausing a completed one).
          content:
            application/problem+json:
              schema: { $ref: "#/components/schemas/Problem" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "422": { $ref: "#/components/responses/Invalid" }
    delete:
      x-haul-operation: downloads.remove
      x-haul-scope: add
      operationId: removeDownload
      summary: Cancel and forget a download; its part file is deleted.
      parameters:
        - name: delete_file
          in: query
          description: Also delete the finished file.
          schema: { type: boolean, default: false }
      responses:
        "503": { $ref: "#/components/responses/StoreUnavailable" }
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "204": { description: Removed. }
        "404": { $ref: "#/components/responses/NotFound" }
        "422": { $ref: "#/components/responses/Invalid" }
  /downloads/{id}/events:
    parameters:
      - name: id
        in: path
        required: true
        schema: { type: string }
    get:
      x-haul-operation: events.follow
      x-haul-scope: read
      operationId: downloadEvents
      summary: Server-sent events about one download.
      description: |
        The events of `/events` about this download only; the stream ends after its `removed` event. A new
        stream (no Last-Event-ID) starts with a `state` event of where the download stands now, finished or not,
        numbered with the current sequence; one that resumes gets what it missed instead.
      parameters:
        - $ref: "#/components/parameters/LastEventIDHeader"
        - $ref: "#/components/parameters/LastEventIDQuery"
        - $ref: "#/components/parameters/Ticket"
        - $ref: "#/components/parameters/AccessToken"
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "503": { $ref: "#/components/responses/TooManyStreams" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200": { $ref: "#/components/responses/EventStream" }
        "404": { $ref: "#/components/responses/NotFound" }
        "422": { $ref: "#/components/responses/Invalid" }
  /events:
    get:
      x-haul-operation: events.follow
      x-haul-scope: read
      operationId: events
      summary: Server-sent events about every download.
      description: |
        A `text/event-stream`. Each event has `id:` (a server-wide sequence number, growing across restarts),
        `event:` and `data:` (JSON; one line, except a snapshot's):
        - `created`, `progress`, `state`: `data` is the download resource. A `state` event announces each new
          state before any `progress` event in it; progress events come at most 4 a second per download (their
          `updated_at` moves with the bytes), and once more right after a state event when bytes moved.
        - `removed`: `data` is `{"id": ...}`.
        - `snapshot`: `data` is `{"downloads": [...]}`, sent instead of the missed events when a reconnecting
          client is further behind than the server remembers (the newest 4,096 events). It spans several `data:`
          lines (a hundred downloads each), which an SSE client joins with line breaks into one JSON document; the
          server writes each only when the client has read the ones before, and holds newer events until it ends.
        Lines starting with `:` are heartbeats (every 15 s on an idle stream). A client that stops reading is
        sent only the latest event per download once 256 KiB are queued for it, and is disconnected after 30 s.
      parameters:
        - $ref: "#/components/parameters/LastEventIDHeader"
        - $ref: "#/components/parameters/LastEventIDQuery"
        - $ref: "#/components/parameters/Ticket"
        - $ref: "#/components/parameters/AccessToken"
        - name: category
          in: query
          description: Only events about the downloads of this category.
          schema: { $ref: "#/components/schemas/CategoryName" }
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "503": { $ref: "#/components/responses/TooManyStreams" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200": { $ref: "#/components/responses/EventStream" }
        "422": { $ref: "#/components/responses/Invalid" }
  /categories:
    get:
      x-haul-operation: categories.list
      x-haul-scope: read
      operationId: listCategories
      summary: The categories, by name.
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: Every category.
          content:
            application/json:
              schema:
                type: object
                required: [categories]
                properties:
                  categories:
                    type: array
                    items: { $ref: "#/components/schemas/Category" }
  /categories/{name}:
    parameters:
      - name: name
        in: path
        required: true
        schema: { $ref: "#/components/schemas/CategoryName" }
    get:
      x-haul-operation: categories.get
      x-haul-scope: read
      operationId: getCategory
      summary: One category.
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: The category.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Category" }
        "404": { $ref: "#/components/responses/NotFound" }
    put:
      x-haul-operation: categories.put
      x-haul-scope: manage
      operationId: putCategory
      summary: Makes or replaces a category; downloads added with `"category"` take its folder and defaults.
      description: |
        A download of the category is stored under `directory` (default the category's name; a download's own
        `directory` is then under it), starts with the category's `connections` and `priority` unless it gives its
        own, and shares `max_speed`: one limit over all the category's running downloads, beside each download's
        own and the global one. Replacing a category changes the limit of running downloads at once; downloads
        already added keep their folder.
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/CategoryChange" }
      responses:
        "503": { $ref: "#/components/responses/StoreUnavailable" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: Replaced.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Category" }
        "201":
          description: Made.
          headers:
            Location: { schema: { type: string }, description: "/categories/{name}" }
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Category" }
        "400": { $ref: "#/components/responses/Malformed" }
        "409":
          description: The server keeps 1,000 categories at most.
          content:
            application/problem+json:
              schema: { $ref: "#/components/schemas/Problem" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "422": { $ref: "#/components/responses/Invalid" }
    delete:
      x-haul-operation: categories.remove
      x-haul-scope: manage
      operationId: removeCategory
      summary: Forgets a category; its downloads keep its name (filters still find them) and their folders.
      responses:
        "503": { $ref: "#/components/responses/StoreUnavailable" }
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "204": { description: Removed. }
        "404": { $ref: "#/components/responses/NotFound" }
  /tickets:
    post:
      x-haul-operation: tickets.issue
      x-haul-scope: read
      operationId: issueTicket
      summary: A ticket that opens one event stream or file for a minute.
      description: |
        For a URL a browser opens without headers (an EventSource, a link to a file): `url` is the path with
        `?ticket=`. The ticket is signed over its expiry and the path, so it opens nothing else, and expires
        within a minute (a stream or a transfer it opened goes on). Nodes with the same token accept each
        other's tickets. The dashboard opens its streams and files this way; the token itself never goes into
        a URL.
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              additionalProperties: false
              required: [path]
              properties:
                path:
                  type: string
                  pattern: "^/(events|downloads/[^/?#]+/(events|file))$"
                  description: "`/events`, `/downloads/{id}/events` or `/downloads/{id}/file`, without a query."
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "422": { $ref: "#/components/responses/Invalid" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "201":
          description: The ticket.
          content:
            application/json:
              schema:
                type: object
                required: [ticket, path, url, expires_at]
                properties:
                  ticket: { type: string }
                  path: { type: string }
                  url: { type: string, description: The path with the ticket as its query. }
                  expires_at: { type: string, format: date-time }
  /stats:
    get:
      x-haul-operation: stats.get
      x-haul-scope: read
      operationId: stats
      summary: Totals over all downloads.
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: Counts by state, speed and bytes, and the event streams open.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Stats" }
  /settings:
    get:
      x-haul-operation: settings.get
      x-haul-scope: read
      operationId: getSettings
      summary: The settings a client may change while the server runs.
      description: |
        The settings in force, `current_max_speed` (the limit of this moment: the speed schedule's window that holds
        it, else `max_speed`; 0 for none), and `defaults`, what the server's flags set. Speeds are bytes per second,
        0 for no limit.
      parameters:
        - $ref: "#/components/parameters/IfNoneMatch"
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "304": { $ref: "#/components/responses/NotModified" }
        "200":
          description: The settings.
          headers:
            ETag: { $ref: "#/components/headers/ETag" }
          content:
            application/json:
              schema: { $ref: "#/components/schemas/SettingsAnswer" }
    patch:
      x-haul-operation: settings.change
      x-haul-scope: manage
      operationId: changeSettings
      summary: Change settings at once; kept in the store.
      description: |
        Any of the fields; null puts one back to the flags' default. A change takes effect at once (a lower
        `max_active` lets running downloads finish, `default_connections` is for downloads added later) and is kept
        in the store, winning over the flags at the next start. The speed schedule's windows are in the server's
        time zone (TZ; UTC in the container), looked at every 30 seconds; the first window that holds the moment
        sets the limit, else `max_speed`. A body with one bad field changes nothing (422).
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/SettingsChange" }
      responses:
        "503": { $ref: "#/components/responses/StoreUnavailable" }
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "422": { $ref: "#/components/responses/Invalid" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: The settings now.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/SettingsAnswer" }
  /metrics:
    get:
      x-haul-operation: metrics.get
      x-haul-scope: read
      operationId: metrics
      summary: Prometheus metrics.
      description: |
        The Prometheus text exposition format 0.0.4: `haul_downloads{state}`, `haul_downloaded_bytes_total`,
        `haul_download_speed_bytes_per_second`, `haul_download_connections`, `haul_event_streams`,
        `haul_event_streams_slow`, `haul_event_queued_bytes`, `haul_http_requests_total{route,method,status}`, the
        histogram `haul_http_request_duration_seconds{route}`, and the standard `process_*` gauges. Routes are
        labelled by pattern (`/downloads/{id}`); paths no route serves share the label `unmatched`.
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: The metrics.
          content:
            text/plain:
              schema: { type: string }
  /healthz:
    get:
      x-haul-operation: server.health
      x-haul-scope: none
      operationId: health
      summary: Liveness.
      security: []
      responses:
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "200":
          description: The server is up.
          content:
            application/json:
              schema:
                type: object
                required: [status]
                properties:
                  status: { type: string, const: ok }
                  node: { type: string, description: "The node that answered, with a store several nodes share." }
  /readyz:
    get:
      x-haul-operation: server.health
      x-haul-scope: none
      operationId: ready
      summary: Readiness.
      description: |
        200 while the store answers, 503 while it cannot be reached (PostgreSQL down or cut off): a load balancer
        sends new requests elsewhere while the process itself is alive (`/healthz` stays 200). The store is asked at
        most once a second however often this is polled.
      security: []
      responses:
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "200":
          description: The store answers.
          content:
            application/json:
              schema:
                type: object
                required: [status]
                properties:
                  status: { type: string, const: ready }
                  node: { type: string }
        "503":
          description: The store cannot be reached.
          headers:
            Retry-After:
              schema: { type: integer, minimum: 1 }
          content:
            application/json:
              schema:
                type: object
                required: [status, reason]
                properties:
                  status: { type: string, const: unavailable }
                  reason: { type: string }
                  node: { type: string }
  /webhooks:
    get:
      x-haul-operation: webhooks.list
      x-haul-scope: admin
      operationId: listWebhooks
      summary: The webhooks, without their secrets.
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: Every webhook, oldest first.
          content:
            application/json:
              schema:
                type: object
                required: [webhooks]
                properties:
                  webhooks:
                    type: array
                    items: { $ref: "#/components/schemas/Webhook" }
    post:
      x-haul-operation: webhooks.add
      x-haul-scope: admin
      operationId: addWebhook
      summary: Adds a receiver of signed POSTs about downloads; its secret is in this answer only.
      description: |
        Each event a webhook asks for (of the downloads of its `category`, or of every download) is one delivery: a
        JSON POST of `{"id", "event", "webhook_id", "created_at", "download"}` (the download resource as it was) with
        the headers `Haul-Event`, `Haul-Delivery` (the delivery's id, the same on every attempt: drop repeats by it),
        `Haul-Webhook` and `Haul-Signature: t=<unix seconds>,v1=<hex>`, where v1 is HMAC-SHA256 under the secret of
        `<t>.<body>`. A receiver checks the MAC and refuses a `t` far from its clock. Deliveries are written to the
        store's outbox in the transaction of the change they tell of, and sent until a 2xx answer, at least once:
        after a failure again after 5 s (five times `--retry-wait`), doubling up to an hour, for 24 hours, and after
        a crash or restart. Receivers are reached under the outbound address policy (`--deny-private-networks`,
        `--allow-networks`), with no redirects followed and 15 s per attempt.
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/NewWebhook" }
      responses:
        "503": { $ref: "#/components/responses/StoreUnavailable" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "201":
          description: The webhook, with its `secret`.
          headers:
            Location: { schema: { type: string }, description: "/webhooks/{id}" }
          content:
            application/json:
              schema:
                allOf:
                  - { $ref: "#/components/schemas/Webhook" }
                  - type: object
                    required: [secret]
                    properties:
                      secret: { type: string, description: "whsec_ and 64 hex digits; shown once." }
        "400": { $ref: "#/components/responses/Malformed" }
        "409":
          description: The server keeps 100 webhooks at most, or the `category` named does not exist.
          content:
            application/problem+json:
              schema: { $ref: "#/components/schemas/Problem" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "422": { $ref: "#/components/responses/Invalid" }
  /webhooks/{id}:
    parameters:
      - name: id
        in: path
        required: true
        schema: { type: string }
    get:
      x-haul-operation: webhooks.get
      x-haul-scope: admin
      operationId: getWebhook
      summary: One webhook, without its secret.
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: The webhook.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Webhook" }
        "404": { $ref: "#/components/responses/NotFound" }
    delete:
      x-haul-operation: webhooks.remove
      x-haul-scope: admin
      operationId: removeWebhook
      summary: Removes a webhook and its deliveries, sent or not.
      responses:
        "503": { $ref: "#/components/responses/StoreUnavailable" }
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "204": { description: Removed. }
        "404": { $ref: "#/components/responses/NotFound" }
  /webhooks/{id}/deliveries:
    parameters:
      - name: id
        in: path
        required: true
        schema: { type: string }
    get:
      x-haul-operation: webhooks.deliveries
      x-haul-scope: admin
      operationId: listWebhookDeliveries
      summary: The webhook's latest deliveries, newest first, with their attempts and outcome.
      parameters:
        - name: limit
          in: query
          schema: { type: integer, minimum: 1, maximum: 1000, default: 50 }
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: Pending deliveries, the newest hundred delivered, and those given up on in the last week.
          content:
            application/json:
              schema:
                type: object
                required: [deliveries]
                properties:
                  deliveries:
                    type: array
                    items: { $ref: "#/components/schemas/WebhookDelivery" }
        "404": { $ref: "#/components/responses/NotFound" }
        "422": { $ref: "#/components/responses/Invalid" }
  /openapi.yaml:
    get:
      x-haul-operation: server.describe
      x-haul-scope: read
      operationId: openapi
      summary: This document.
      responses:
        "400": { $ref: "#/components/responses/Malformed" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403": { $ref: "#/components/responses/Forbidden" }
        "414": { $ref: "#/components/responses/UriTooLong" }
        "429": { $ref: "#/components/responses/TooManyAttempts" }
        "200":
          description: The API contract.
          content:
            application/yaml:
              schema: { type: object, description: This OpenAPI document. }
components:
  securitySchemes:
    bearer:
      type: http
      scheme: bearer
      description: The server's `--token`. Event streams and files also take a `?ticket=` or `?access_token=`.
  schemas:
    State:
      type: string
      enum: [queued, probing, downloading, verifying, completed, paused, failed]
    NewDownload:
      type: object
      additionalProperties: false
      oneOf:
        - required: [url]
          not: { required: [urls] }
        - required: [urls]
          not: { anyOf: [{ required: [url] }, { required: [mirrors] }] }
      properties:
        url: { type: string, format: uri, description: "http or https; credentials in it are never shown back." }
        mirrors:
          type: array
          maxItems: 16
          items: { type: string, format: uri }
          description: |
            Other sources of the same file. Each is probed (HEAD) once the size is known and dropped, with the
            reason, if its size differs, it serves no ranges, or it announces a digest (Repr-Digest, Digest) other
            than `checksum`; segments are spread over the sources that agree, more to the faster ones, and a mirror
            that fails twice (or answers a range wrongly) is dropped while the others finish the file. A source
            named twice is one source.
        urls:
          type: array
          minItems: 1
          maxItems: 17
          items: { type: string, format: uri }
          description: Every source, the first one as `url` and the rest as `mirrors` (instead of those two).
        filename:
          type: string
          pattern: '^[^/\\\u0000-\u001f\u007f]*[^/\\\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000.<>:"|?*][^/\\\u0000-\u001f\u007f]*$'
          description: |
            A plain file name (sanitized: no separators, control characters, invisible format characters such as
            U+202E or leading dots; over 240 bytes is refused, never cut); chosen from the server's answer when
            absent, with the same rules.
        directory:
          type: string
          pattern: '^([^/\\\u0000-\u001f\u007f]*[^/\\\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000.<>:"|?*][^/\\\u0000-\u001f\u007f]*(/[^/\\\u0000-\u001f\u007f]*[^/\\\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000.<>:"|?*][^/\\\u0000-\u001f\u007f]*)*)?$'
          description: |
            Relative to the download root; components as for `filename` (each at most 255 bytes), no `.` or `..`;
            at most 32 folders and 1,024 bytes, a category's folder included (422 beyond, never cut).
        connections: { type: integer, minimum: 1, maximum: 32 }
        headers:
          type: object
          maxProperties: 64
          propertyNames:
            pattern: "^[-!#$%&'*+.^_`|~0-9A-Za-z]+$"
            not: { pattern: "^([Rr][Aa][Nn][Gg][Ee]|[Ii][Ff]-[Rr][Aa][Nn][Gg][Ee]|[Hh][Oo][Ss][Tt]|[Cc][Oo][Nn][Tt][Ee][Nn][Tt]-[Ll][Ee][Nn][Gg][Tt][Hh]|[Tt][Rr][Aa][Nn][Ss][Ff][Ee][Rr]-[Ee][Nn][Cc][Oo][Dd][Ii][Nn][Gg]|[Cc][Oo][Nn][Nn][Ee][Cc][Tt][Ii][Oo][Nn]|[Aa][Cc][Cc][Ee][Pp][Tt]-[Ee][Nn][Cc][Oo][Dd][Ii][Nn][Gg]|[Tt][Ee]|[Tt][Rr][Aa][Ii][Ll][Ee][Rr]|[Uu][Pp][Gg][Rr][Aa][Dd][Ee]|[Kk][Ee][Ee][Pp]-[Aa][Ll][Ii][Vv][Ee]|[Pp][Rr][Oo][Xx][Yy]-[Cc][Oo][Nn][Nn][Ee][Cc][Tt][Ii][Oo][Nn]|[Ee][Xx][Pp][Ee][Cc][Tt]|[Hh][Tt][Tt][Pp]2-[Ss][Ee][Tt][Tt][Ii][Nn][Gg][Ss])$" }
          additionalProperties: { type: string, pattern: "^[^\\u0000-\\u0008\\u000A-\\u001F\\u007F]*$" }
          description: |
            Sent to the origin with every request; never shown back. Names are RFC 9110 tokens, each given once
            (without regard to case); values hold no CR, LF, NUL or other control character (a tab is allowed), and
            whitespace around a value is dropped. At most 64 headers and 16 KiB of names and values together (422
            beyond). Haul sets Range, If-Range, Host, Content-Length, Transfer-Encoding, Connection and
            Accept-Encoding itself, and the connection headers TE, Trailer, Upgrade, Keep-Alive, Proxy-Connection,
            Expect and HTTP2-Settings cannot be given.
        priority: { type: integer, minimum: -1000, maximum: 1000, description: "Default the category's, else 0." }
        category:
          $ref: "#/components/schemas/CategoryName"
          description: A category made with PUT /categories/{name} (409 otherwise); its folder and defaults apply.
        max_speed: { type: integer, minimum: 0, maximum: 1125899906842624, description: "Bytes per second; 0 for unlimited." }
        start_paused: { type: boolean, default: false }
        checksum:
          type: string
          pattern: "^(sha256:[0-9a-fA-F]{64}|sha1:[0-9a-fA-F]{40}|md5:[0-9a-fA-F]{32})$"
          description: Verified before the file gets its name; a mismatch fails with checksum_mismatch.
        insecure:
          type: boolean
          default: false
          description: |
            Fetch over TLS without verifying the certificate. Off by default: a certificate that does not
            verify fails the download with tls_failed.
        size:
          type: integer
          minimum: 0
          maximum: 1125899906842624
          description: |
            The size in bytes the file is expected to have, when the client knows it. A file that would leave less
            than `--min-free-space` free, or is larger than `--max-file-size`, is refused at once (507); an origin
            that announces another size fails the download with size_mismatch.
    DownloadAction:
      type: object
      additionalProperties: false
      required: [action]
      oneOf:
        - { required: [ids] }
        - { required: [state] }
      properties:
        action: { type: string, enum: [pause, resume, remove] }
        ids:
          type: array
          minItems: 1
          maxItems: 10000
          items: { type: string }
        state:
          type: array
          minItems: 1
          maxItems: 7
          items: { $ref: "#/components/schemas/State" }
        delete_file:
          type: boolean
          description: With remove, also delete finished files.
      if: { required: [delete_file], properties: { delete_file: { const: true } } }
      then: { properties: { action: { const: remove } } }
    ActionAnswer:
      type: object
      required: [results, succeeded, failed]
      properties:
        results:
          type: array
          items:
            type: object
            required: [id, status]
            properties:
              id: { type: string }
              status: { type: integer, description: "200 (with the download), 204 removed, or the problem's." }
              download: { $ref: "#/components/schemas/Download" }
              problem: { $ref: "#/components/schemas/Problem" }
        succeeded: { type: integer, minimum: 0 }
        failed: { type: integer, minimum: 0 }
    NewDownloadBatch:
      type: object
      additionalProperties: false
      required: [downloads]
      properties:
        downloads:
          type: array
          minItems: 1
          maxItems: 1000
          description: |
            Each element a `NewDownload`. Elements are checked one by one, not as a whole: one that is not a valid
            `NewDownload` (not even an object) gets its problem in `results`, and the others are added all the same
            (unless `atomic`).
          items: {}
        atomic:
          type: boolean
          default: false
          description: All or nothing; otherwise each element is added or refused on its own.
      # An atomic batch is refused whole for one bad element: then each must be a NewDownload.
      if: { required: [atomic], properties: { atomic: { const: true } } }
      then: { properties: { downloads: { items: { $ref: "#/components/schemas/NewDownload" } } } }
    BatchAnswer:
      type: object
      additionalProperties: false
      required: [results, created, existing, failed]
      properties:
        results:
          type: array
          description: One result per element of `downloads`, in order.
          items: { $ref: "#/components/schemas/BatchResult" }
        created: { type: integer, minimum: 0 }
        existing: { type: integer, minimum: 0 }
        failed: { type: integer, minimum: 0 }
    BatchResult:
      type: object
      additionalProperties: false
      required: [status]
      properties:
        status:
          type: integer
          description: 201 added, 200 the existing unfinished one; else the status of `problem`.
        download: { $ref: "#/components/schemas/Download" }
        problem: { $ref: "#/components/schemas/Problem" }
    Settings:
      type: object
      required: [max_active, max_speed, default_connections, max_connections_per_host, speed_schedule]
      properties:
        max_active: { type: integer, minimum: 1, maximum: 1000, description: Downloads running at once. }
        max_speed: { type: integer, minimum: 0, description: "Over all downloads, outside the schedule's windows; 0 for none." }
        default_connections: { type: integer, minimum: 1, maximum: 32, description: For a download that asks for none. }
        max_connections_per_host: { type: integer, minimum: 1, maximum: 1024 }
        speed_schedule:
          type: array
          maxItems: 50
          items: { $ref: "#/components/schemas/SpeedWindow" }
    SettingsAnswer:
      allOf:
        - { $ref: "#/components/schemas/Settings" }
      type: object
      required: [current_max_speed, defaults]
      properties:
        current_max_speed: { type: integer, minimum: 0, description: "The limit in force now; 0 for none." }
        defaults: { $ref: "#/components/schemas/Settings" }
    SettingsChange:
      type: object
      additionalProperties: false
      properties:
        max_active: { type: [integer, "null"], minimum: 1, maximum: 1000 }
        max_speed: { type: [integer, "null"], minimum: 0, maximum: 1125899906842624 }
        default_connections: { type: [integer, "null"], minimum: 1, maximum: 32 }
        max_connections_per_host: { type: [integer, "null"], minimum: 1, maximum: 1024 }
        speed_schedule:
          type: [array, "null"]
          maxItems: 50
          items: { $ref: "#/components/schemas/SpeedWindow" }
    SpeedWindow:
      type: object
      additionalProperties: false
      required: [from, to, max_speed]
      description: |
        From `from` to `to` on each of `days` (all when absent); a window whose `to` is before its `from` runs past
        midnight into the next day, and one whose `to` is its `from` lasts 24 hours.
      properties:
        days:
          type: array
          minItems: 1
          maxItems: 7
          items: { type: string, enum: [mon, tue, wed, thu, fri, sat, sun] }
        from: { type: string, pattern: "^([01][0-9]|2[0-3]):[0-5][0-9]$" }
        to: { type: string, pattern: "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$" }
        max_speed: { type: integer, minimum: 0, maximum: 1125899906842624, description: "0 for no limit in the window." }
    DownloadPatch:
      type: object
      additionalProperties: false
      properties:
        state: { type: string, enum: [paused, queued] }
        priority: { type: integer, minimum: -1000, maximum: 1000 }
        max_speed:
          type: [integer, "null"]
          minimum: 0
          maximum: 1125899906842624
          description: "Takes effect at once; null or 0 lifts it."
        connections: { type: integer, minimum: 1, maximum: 32, description: Takes effect at once. }
    Segment:
      type: object
      required: [start, end, received]
      properties:
        start: { type: integer }
        end: { type: [integer, "null"], description: Last byte (inclusive); null when the size is unknown. }
        received: { type: integer }
    DownloadError:
      type: object
      required: [code, message]
      properties:
        code:
          type: string
          description: |
            Stable: dns_failed, connect_failed, timeout, tls_failed, too_many_redirects, connection_cut,
            network_error, write_failed, disk_full, insufficient_space (the file would leave less than
            `--min-free-space` free; refused before any block is reserved), file_too_large (over
            `--max-file-size`), size_mismatch, range_mismatch, remote_changed,
            checksum_mismatch, internal_error, bad_response (malformed, or headers over 100 KiB),
            blocked_address (`--deny-private-networks` refused the
            address connected to, also after a redirect), unsupported_scheme (a redirect to anything but http
            or https), or http_<status> (http_404, http_503, ...).
        message: { type: string }
    Download:
      type: object
      required: [id, url, final_url, filename, path, state, total_bytes, received_bytes, progress, speed,
                 eta_seconds, connections, active_connections, resumable, segments, checksum, insecure, priority,
                 max_speed, error, last_error, next_attempt_at, attempts, created_at, updated_at, started_at,
                 completed_at, node, category, mirrors]
      properties:
        id: { type: string }
        category: { type: [string, "null"] }
        mirrors:
          type: array
          description: The other sources, in the order given; `url` is the first source.
          items:
            type: object
            required: [url, state, reason, received_bytes, speed, errors]
            properties:
              url: { type: string }
              state: { type: string, enum: [pending, active, dropped] }
              reason: { type: [string, "null"], description: Why it was dropped. }
              received_bytes: { type: integer, description: Bytes written from it. }
              speed: { type: number, description: Bytes per second from it now. }
              errors: { type: integer }
        url: { type: string }
        final_url: { type: [string, "null"], description: After redirects. }
        filename:
          type: [string, "null"]
          description: |
            The file's name: the one the client gave from the first answer on, else the server's once probed (a
            name already taken gets " (1)" before its extension).
        path: { type: [string, "null"], description: Relative to the download root. }
        state: { $ref: "#/components/schemas/State" }
        total_bytes: { type: [integer, "null"] }
        received_bytes: { type: integer }
        progress: { type: [number, "null"], minimum: 0, maximum: 1 }
        speed: { type: number, description: Bytes per second, smoothed. }
        eta_seconds: { type: [number, "null"] }
        connections: { type: integer }
        active_connections: { type: integer }
        resumable: { type: boolean }
        segments:
          type: array
          description: The byte ranges being fetched, in file order; a connection works on one at a time.
          items: { $ref: "#/components/schemas/Segment" }
        checksum: { type: [string, "null"], description: "algorithm:hex, lower case" }
        insecure: { type: boolean }
        priority: { type: integer }
        max_speed: { type: [integer, "null"] }
        error:
          description: Why the download failed (state failed only).
          oneOf:
            - { $ref: "#/components/schemas/DownloadError" }
            - { type: "null" }
        last_error:
          description: |
            The failure that made the download try again (a connection cut, a 503, ...), while it retries and after,
            until it completes or a client resumes it.
          oneOf:
            - { $ref: "#/components/schemas/DownloadError" }
            - { type: "null" }
        next_attempt_at:
          type: [string, "null"]
          format: date-time
          description: |
            While the download waits to try again and nothing else of it is under way (its first request after a
            failed attempt, or every connection waiting): when it will. The state stays what it was (probing or
            downloading).
        attempts: { type: integer, description: Attempts that failed and were retried in this run. }
        created_at: { type: string, format: date-time }
        updated_at: { type: string, format: date-time, description: The last change, progress included. }
        started_at: { type: [string, "null"], format: date-time }
        completed_at: { type: [string, "null"], format: date-time }
        node:
          type: [string, "null"]
          description: >-
            With several nodes on one PostgreSQL store (`--store`, `--node`): the node that runs the download, or
            last ran it (a finished file is in that node's download directory unless the nodes share one). Null
            with SQLite.
    DownloadList:
      type: object
      required: [downloads, next_cursor, sequence]
      properties:
        downloads:
          type: array
          items: { $ref: "#/components/schemas/Download" }
        next_cursor: { type: [string, "null"] }
        sequence:
          type: integer
          description: The newest event number; pass it as `changed_since` or `Last-Event-ID` to continue from here.
        removed:
          type: array
          items: { type: string }
          description: With `changed_since` only.
        reset:
          type: boolean
          description: With `changed_since` only; true when this is the full list instead of a delta.
    Stats:
      type: object
      required: [downloads, active, queued, paused, completed, failed, speed, received_bytes, active_connections,
                 event_streams, slow_event_streams, event_queued_bytes, sequence, disk]
      properties:
        downloads: { type: integer }
        active: { type: integer, description: "probing, downloading or verifying" }
        queued: { type: integer }
        paused: { type: integer }
        completed: { type: integer }
        failed: { type: integer }
        speed: { type: number, description: Bytes per second over all downloads. }
        received_bytes: { type: integer }
        active_connections: { type: integer }
        event_streams: { type: integer }
        slow_event_streams: { type: integer }
        event_queued_bytes: { type: integer }
        sequence: { type: integer }
        disk:
          description: >-
            The file system of the download root (null when it cannot be read). `usable_bytes` is what downloads may
            still write: the free space less `--min-free-space`; a POST whose `size` does not fit gets 507.
          type: [object, "null"]
          required: [free_bytes, total_bytes, reserved_bytes, usable_bytes]
          properties:
            free_bytes: { type: integer }
            total_bytes: { type: integer }
            reserved_bytes: { type: integer }
            usable_bytes: { type: integer }
    NewWebhook:
      type: object
      required: [url]
      additionalProperties: false
      properties:
        url: { type: string, format: uri, description: "http or https" }
        events:
          type: array
          minItems: 1
          maxItems: 5
          uniqueItems: true
          items: { $ref: "#/components/schemas/WebhookEvent" }
          description: Default created, completed, failed and removed; `state` is every change of state.
        category: { $ref: "#/components/schemas/CategoryName" }
    Category:
      type: object
      required: [name, directory, connections, max_speed, priority]
      properties:
        name: { $ref: "#/components/schemas/CategoryName" }
        directory: { type: string, description: Relative to the download root. }
        connections: { type: [integer, "null"] }
        max_speed: { type: [integer, "null"], description: Bytes per second over all its running downloads. }
        priority: { type: [integer, "null"] }
    CategoryChange:
      type: object
      additionalProperties: false
      properties:
        directory:
          type: string
          pattern: '^([^/\\\u0000-\u001f\u007f]*[^/\\\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000.<>:"|?*][^/\\\u0000-\u001f\u007f]*(/[^/\\\u0000-\u001f\u007f]*[^/\\\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000.<>:"|?*][^/\\\u0000-\u001f\u007f]*)*)?$'
          description: Relative to the download root, as a download's `directory`; default the category's name.
        connections: { type: [integer, "null"], minimum: 1, maximum: 32 }
        max_speed: { type: [integer, "null"], minimum: 0, maximum: 1125899906842624, description: "0 or null: none" }
        priority: { type: [integer, "null"], minimum: -1000, maximum: 1000 }
    CategoryName:
      type: string
      pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'
      description: A category's name (for a webhook, only the downloads of that category).
    WebhookEvent:
      type: string
      enum: [created, completed, failed, removed, state]
    Webhook:
      type: object
      required: [id, url, events, category, created_at]
      properties:
        id: { type: string }
        url: { type: string, description: Credentials in it are redacted. }
        events:
          type: array
          items: { $ref: "#/components/schemas/WebhookEvent" }
        category: { type: [string, "null"] }
        created_at: { type: string, format: date-time }
    WebhookDelivery:
      type: object
      required: [id, event, download_id, state, attempts, created_at, last_attempt_at, last_status, last_error,
                 next_attempt_at]
      properties:
        id: { type: string, description: "The Haul-Delivery header." }
        event: { $ref: "#/components/schemas/WebhookEvent" }
        download_id: { type: string }
        state: { type: string, enum: [pending, delivered, failed], description: "failed: given up after 24 hours" }
        attempts: { type: integer }
        created_at: { type: string, format: date-time }
        last_attempt_at: { type: [string, "null"], format: date-time }
        last_status: { type: [integer, "null"], description: "The receiver's HTTP status, null when none answered." }
        last_error: { type: [string, "null"] }
        next_attempt_at: { type: [string, "null"], format: date-time }
    RemovedEvent:
      type: object
      required: [id]
      properties:
        id: { type: string }
    SnapshotEvent:
      type: object
      required: [downloads]
      properties:
        downloads:
          type: array
          items: { $ref: "#/components/schemas/Download" }
    Problem:
      type: object
      required: [type, title, status, detail]
      properties:
        type: { type: string, description: "urn:haul:problem:<slug>" }
        title: { type: string }
        status: { type: integer }
        detail: { type: string }
        instance: { type: string }
        errors:
          type: array
          items:
            type: object
            required: [field, message]
            properties:
              field: { type: string }
              message: { type: string }
        results:
          type: array
          description: A refused atomic batch's elements, each one's fate.
          items: { $ref: "#/components/schemas/BatchResult" }
  parameters:
    IfNoneMatch:
      name: If-None-Match
      in: header
      description: An ETag from an earlier answer; 304 when the answer would be the same.
      schema: { type: string }
    LastEventIDHeader:
      name: Last-Event-ID
      in: header
      description: The id of the last event received; the stream resumes after it.
      schema: { type: string }
    Ticket:
      name: ticket
      in: query
      description: A ticket from `POST /tickets` for this path, instead of the token.
      schema: { type: string }
    AccessToken:
      name: access_token
      in: query
      description: The token itself, for scripts; browsers use a ticket, which keeps it out of logs and history.
      schema: { type: string }
    LastEventIDQuery:
      name: last_event_id
      in: query
      description: The same as the Last-Event-ID header, for clients that cannot set headers.
      schema: { type: integer, minimum: 0, maximum: 9223372036854775807 }
  headers:
    ETag:
      description: Changes whenever the body would.
      schema: { type: string }
  responses:
    NotModified:
      description: Nothing changed since the ETag given in If-None-Match.
      headers:
        ETag: { $ref: "#/components/headers/ETag" }
    EventStream:
      description: |
        The event stream: `id:`, `event:` and one `data:` line of JSON per event. `x-events` gives the schema of
        the `data` of each event name.
      content:
        text/event-stream:
          schema: { type: string }
          x-events:
            created: { $ref: "#/components/schemas/Download" }
            progress: { $ref: "#/components/schemas/Download" }
            state: { $ref: "#/components/schemas/Download" }
            removed: { $ref: "#/components/schemas/RemovedEvent" }
            snapshot: { $ref: "#/components/schemas/SnapshotEvent" }
    Malformed:
      description: |
        The body is not valid JSON, or not an object; or the query has a parameter the operation does not take
        (a misspelt filter is refused rather than read as "all").
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    NotFound:
      description: No such download.
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    TooLarge:
      description: The body is larger than 1 MiB.
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    UnsupportedMediaType:
      description: "The body is not sent as `Content-Type: application/json` (parameters such as charset allowed)."
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    Invalid:
      description: Fields are missing or invalid; `errors` lists them.
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    Unauthorized:
      description: The server has a token and the request did not carry it (or carried a wrong one).
      headers:
        WWW-Authenticate:
          schema: { type: string, const: 'Bearer realm="haul"' }
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    Forbidden:
      description: |
        The `Host` header names a host this server does not answer to (`host-not-allowed`), or a browser origin
        not allowed by `--cors-origin` asked for a change (`origin-not-allowed`).
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    TooManyAttempts:
      description: Too many wrong tokens from this address; wait `Retry-After` seconds, whatever the token.
      headers:
        Retry-After:
          schema: { type: integer, minimum: 1 }
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    UriTooLong:
      description: The path and query are longer than 8 KiB.
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    TooManyDownloads:
      description: |
        Insufficient storage: the server holds `--max-downloads` downloads already (type
        urn:haul:problem:too-many-downloads; remove finished ones), or the `size` given does not fit in the free
        space less `--min-free-space` (urn:haul:problem:insufficient-space) or is over `--max-file-size`
        (urn:haul:problem:file-too-large).
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    StoreUnavailable:
      description: "The store cannot be written now (PostgreSQL unreachable, a full disk): nothing was changed; try again after `Retry-After` seconds."
      headers:
        Retry-After:
          schema: { type: integer, minimum: 1 }
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
    TooManyStreams:
      description: "`--max-event-streams` streams are open; try again after `Retry-After` seconds."
      headers:
        Retry-After:
          schema: { type: integer, minimum: 1 }
      content:
        application/problem+json:
          schema: { $ref: "#/components/schemas/Problem" }
"""#
}
