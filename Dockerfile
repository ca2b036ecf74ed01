# The standalone sandbox, built with the README's own commands.
FROM node:20.20-slim
WORKDIR /app
COPY package.json package-lock.json ./
# Dependencies in their own layer. The project's own build (its `prepare` script) needs the
# sources, which are not copied yet: scripts are skipped here, better-sqlite3's (for --data-dir)
# is run on its own, and the build runs once the sources are in.
RUN npm ci --no-audit --no-fund --ignore-scripts && npm rebuild better-sqlite3
COPY . .
RUN npm run build
ENV NODE_ENV=production
EXPOSE 4010
USER node
CMD ["node", "dist/cli.js", "serve", "--host", "0.0.0.0"]
