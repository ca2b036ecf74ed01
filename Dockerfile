# The standalone sandbox, built with the README's own commands.
FROM node:20.20-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build
ENV NODE_ENV=production
EXPOSE 4010
USER node
CMD ["node", "dist/cli.js", "serve", "--host", "0.0.0.0"]
