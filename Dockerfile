FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/api ./cmd/api && \
    CGO_ENABLED=0 go build -o /out/worker ./cmd/worker && \
    for role in sends segments domains webhooks; do \
      CGO_ENABLED=0 go build -o /out/worker-$role ./cmd/worker-$role || exit 1; \
    done && \
    CGO_ENABLED=0 go build -o /out/devtoken ./cmd/devtoken

FROM node:20-bookworm-slim
WORKDIR /app
COPY internal/mjml/node/package.json internal/mjml/node/package-lock.json internal/mjml/node/worker.js /app/mjml/node/
RUN npm ci --prefix /app/mjml/node --omit=dev --no-audit --no-fund
ENV MJML_DIR=/app/mjml/node
COPY --from=build /out/ /app/bin/
RUN mkdir -p /app/var/outbox
EXPOSE 8080 8081
CMD ["/app/bin/api"]
