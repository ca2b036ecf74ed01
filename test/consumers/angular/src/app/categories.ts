// The app's component: lists the API's categories, or the API's error.
import { HttpClient, HttpErrorResponse } from '@angular/common/http'
import { Component, inject, signal } from '@angular/core'

interface Category {
  id: number
  name: string
}

@Component({
  selector: 'app-categories',
  template: `
    @if (error()) {
      <p role="alert">{{ error() }}</p>
    } @else if (categories(); as list) {
      @if (list.length === 0) {
        <p>No categories yet</p>
      }
      <ul>
        @for (category of list; track category.id) {
          <li>{{ category.name }}</li>
        }
      </ul>
    } @else {
      <p>Loading…</p>
    }
  `,
})
export class Categories {
  readonly categories = signal<Category[] | undefined>(undefined)
  readonly error = signal('')

  constructor() {
    inject(HttpClient)
      .get<Category[]>('https://api.shop.test/v1/categories', { headers: { authorization: 'Bearer t0ken' } })
      .subscribe({
        next: (list) => this.categories.set(list),
        error: (failure: HttpErrorResponse) => this.error.set(`The shop answered ${failure.status}`),
      })
  }
}
